package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/testkit"
)

// Bounds of the scale mode's flags: far beyond what runs in reasonable
// time, and a bound on what is allocated.
const (
	maxScaleNodes   = 1000
	maxScaleUnits   = 1_000_000
	maxScaleSources = 1000
)

// scaleFlags are the flags of `drover sim --scale`.
type scaleFlags struct {
	on                    bool
	nodes, units, sources int
}

func addScaleFlags(cmd *cobra.Command) *scaleFlags {
	f := &scaleFlags{}
	cmd.Flags().BoolVar(&f.on, "scale", false, "run the scale scenarios (cold start, kill -9, join, rolling restart) and print their table")
	cmd.Flags().IntVar(&f.nodes, "nodes", 100, "with --scale: nodes in the cluster")
	cmd.Flags().IntVar(&f.units, "units", 20000, "with --scale: units (stream partitions) in all")
	cmd.Flags().IntVar(&f.sources, "sources", 4, "with --scale: sources the units are spread over")
	return f
}

// check reports a flag the scale mode cannot take, as an exit-2 error.
func (f *scaleFlags) check(cmd *cobra.Command) error {
	if !f.on {
		for _, name := range []string{"nodes", "units", "sources"} {
			if cmd.Flags().Changed(name) {
				return &exitError{2, fmt.Errorf("--%s needs --scale", name)}
			}
		}
		return nil
	}
	for _, name := range []string{"runs", "store", "break-fencing"} {
		if cmd.Flags().Changed(name) {
			return &exitError{2, fmt.Errorf("--%s does not go with --scale", name)}
		}
	}
	switch {
	case f.nodes < 2 || f.nodes > maxScaleNodes:
		return &exitError{2, fmt.Errorf("--nodes %d: must be between 2 and %d", f.nodes, maxScaleNodes)}
	case f.sources < 1 || f.sources > maxScaleSources:
		return &exitError{2, fmt.Errorf("--sources %d: must be between 1 and %d", f.sources, maxScaleSources)}
	case f.units < f.sources || f.units > maxScaleUnits:
		return &exitError{2, fmt.Errorf("--units %d: must be between --sources (%d) and %d", f.units, f.sources, maxScaleUnits)}
	}
	return nil
}

// runScale is `drover sim --scale`: one cluster through the scale
// scenarios, its table on stdout.
func runScale(cmd *cobra.Command, f *scaleFlags, seed uint64, verbose bool) error {
	out := cmd.OutOrStdout()
	cfg := testkit.ScaleConfig{Seed: seed, Nodes: f.nodes, Units: f.units, Sources: f.sources}
	if verbose {
		cfg.Log = func(s string) { fmt.Fprintln(out, "  "+s) }
	}
	start := time.Now()
	cpu0, cpuOK := processCPU()
	res, err := testkit.Scale(cfg)
	if err != nil {
		return &exitError{1, err}
	}
	fmt.Fprint(out, res.Table())
	took := fmt.Sprintf("took %s", time.Since(start).Round(time.Millisecond))
	if cpu1, ok := processCPU(); cpuOK && ok {
		took += fmt.Sprintf(", %s of CPU", (cpu1 - cpu0).Round(time.Millisecond))
	}
	fmt.Fprintln(cmd.ErrOrStderr(), took)
	if !res.OK() {
		return &exitError{1, fmt.Errorf("the scale run broke an invariant or did not settle")}
	}
	return nil
}
