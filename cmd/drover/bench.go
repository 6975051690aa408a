package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/cluster/bench"
)

func newBench() *cobra.Command {
	var (
		o          bench.Options
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "bench [--store postgres|postgres://…] [--nodes N] [--partitions 12] [--messages 300000] [--rate R] [--compare-partitions 64,1024] [--idle N]",
		Short: "measure drover end to end against the store's own ceiling and a plain consumer loop",
		Long: `bench preloads an in-process Kafka (kfake) with --messages JSON orders of
--payload bytes over --keys keys and measures, in the same run:

  drover:  a node in this process (or --nodes N node processes) consuming the
           topic to its end: from the node's start to every partition's
           checkpoint at its last offset; the records are then read back and
           each key must hold its last document
  ceiling: the same messages decoded and folded before the clock starts, cut
           into --batch batches per partition, written by the store's own SQL:
           PostgreSQL 12 workers, each batch one pipelined unnest upsert +
           checkpoint; SQLite one connection, one immediate transaction per
           batch with a prepared upsert per row that skips unchanged documents
  loop:    a plain franz-go consumer with encoding/json and the ceiling's SQL
  latency: with the drover node still running, messages published at --rate
           (default half the drover figure) for --latency-for: p50/p99/max of
           the record timestamp to the first checkpoint poll (every 5 ms) that
           covers the message

The store is SQLite in a temporary directory (or --dir) unless --store says
postgres (a throwaway server from the local binaries, fsync off) or
postgres://… (bench drops and rewrites its own bench_* tables and rows there).
The last line is
  bench: partitions=… messages=… drover=… ceiling=… vs_ceiling=… p50=… p99=… loop=… max=…
with the rates in messages per second.

--compare-partitions 64,1024 runs the drover figure again at each count (fresh
topic and table) and prints the ratio of the last to the first.

--idle N measures only idle units instead: a node process with one memory-source
unit, then one with N, on SQLite; it prints the resident memory per unit above
the 1-unit node and the node's CPU over --idle-window.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// zero means the default in bench.Options; given as a flag it is
			// a mistake
			for name, v := range map[string]int{"partitions": o.Partitions, "messages": o.Messages, "keys": o.Keys,
				"batch": o.Batch, "payload": o.Payload, "ceiling-workers": o.CeilingWorkers} {
				if v == 0 {
					return &exitError{2, fmt.Errorf("--%s 0: must be at least 1", name)}
				}
			}
			for name, v := range map[string]time.Duration{"max-wait": o.MaxWait, "idle-window": o.IdleWindow} {
				if v == 0 {
					return &exitError{2, fmt.Errorf("--%s 0: must be positive", name)}
				}
			}
			if o.LatencyFor == 0 {
				o.SkipLatency = true
			}
			bin, err := os.Executable()
			if err != nil {
				return &exitError{1, err}
			}
			o.Binary = bin // for --nodes and --idle
			if err := o.Validate(); err != nil {
				return &exitError{2, err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return &exitError{2, fmt.Errorf("--cpuprofile: %w", err)}
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return &exitError{1, fmt.Errorf("--cpuprofile: %w", err)}
				}
				defer pprof.StopCPUProfile()
			}
			if _, err := bench.Run(ctx, o, cmd.OutOrStdout()); err != nil {
				return &exitError{1, err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Store, "store", "", "postgres (a throwaway server), postgres://… (an empty database, or one bench used), or nothing: SQLite")
	f.IntVar(&o.Nodes, "nodes", 0, "node processes of this binary for the drover figure; 0: one node in this process")
	f.IntVar(&o.Partitions, "partitions", 12, "partitions of the topic")
	f.IntVar(&o.Messages, "messages", 300_000, "messages preloaded")
	f.IntVar(&o.Keys, "keys", 100_000, "distinct keys (message i has key i mod keys)")
	f.IntVar(&o.Batch, "batch", 500, "batch_size of drover, the ceiling and the loop")
	f.DurationVar(&o.MaxWait, "max-wait", 200*time.Millisecond, "max_wait of drover and the loop")
	f.IntVar(&o.Payload, "payload", 200, fmt.Sprintf("bytes per message (at least %d)", bench.MinPayload))
	f.IntVar(&o.Rate, "rate", 0, "messages per second published for the latency figure; 0: half the drover figure")
	f.DurationVar(&o.LatencyFor, "latency-for", 10*time.Second, "how long the latency figure publishes; 0 leaves it out")
	f.IntVar(&o.CeilingWorkers, "ceiling-workers", 12, "concurrent writers of the PostgreSQL ceiling and loop")
	f.IntSliceVar(&o.ComparePartitions, "compare-partitions", nil, "run the drover figure at each of these partition counts too: 64,1024")
	f.IntVar(&o.Idle, "idle", 0, "measure N idle units (memory sources, SQLite) instead of the throughput figures")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the bench and its in-process node, ceiling and loop) to this file")
	f.DurationVar(&o.IdleWindow, "idle-window", 60*time.Second, "how long --idle measures CPU")
	f.StringVar(&o.Dir, "dir", "", "directory for the SQLite file and node configs and logs (kept); default a temporary one, removed")
	return cmd
}
