package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
	"github.com/drover-dev/drover/testkit"
)

// maxSimRuns bounds --runs: far more than any use (a million runs take
// hours), and a bound on what is allocated for them.
const maxSimRuns = 1_000_000

// simChunk is how many runs per core sim runs before it prints them.
var simChunk = 16

func newSim() *cobra.Command {
	var (
		seed         uint64
		runs         int
		store        string
		verbose      bool
		breakFencing bool
		groupCommit  string
		scale        *scaleFlags
	)
	cmd := &cobra.Command{
		Use:   "sim --seed N [--runs M] [--store memory|sqlite] | sim --scale [--nodes N] [--units U] [--sources S]",
		Short: "run deterministic random cluster scenarios and check every invariant",
		Long: `sim draws a whole scenario from a seed — nodes, a stream and a queue, messages of
every kind (good, malformed, tombstones, deletes, Debezium), kills, graceful
stops, partitions, GC pauses, broker and store faults, a reshard, an
operator's pause and resume of a source or a unit, operators' seeks back —
runs it in virtual time on one goroutine, lets the cluster settle and checks:
nothing lost, nothing applied twice (but exactly the re-applies a seek back
asks for), order per unit, one applier per lease token, failover within its
bound, no ghost units in a node's tree, no apply of a paused unit once the
pause has had time to reach its owner, and the others
README's "The simulator" lists.

The last line of each run is
  seed=<n> digest=<hex> applied=<n> lost=<n> duplicated=<n>
The same seed always prints the same line. The exit status is 1 when an
invariant broke; the broken invariant and a replay hint are printed above.

With --scale it runs one large cluster (default 100 nodes, 20,000 units over
4 sources) through a cold start, a kill -9 of one node, a node joining and a
rolling restart, and prints a table: virtual seconds until every unit is owned
exactly once, units moved, lease statements, and the CPU time placement
takes per membership change. Rows are the same for a seed but for the
placement times (the time the run took goes to stderr).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := scale.check(cmd); err != nil {
				return err
			}
			if scale.on {
				return runScale(cmd, scale, seed, verbose)
			}
			if runs < 1 || runs > maxSimRuns {
				return &exitError{2, fmt.Errorf("--runs %d: must be between 1 and %d", runs, maxSimRuns)}
			}
			if last := seed + uint64(runs-1); last < seed {
				return &exitError{2, fmt.Errorf("--seed %d --runs %d: the last seed would pass %d (seeds are unsigned 64-bit)", seed, runs, uint64(math.MaxUint64))}
			}
			var tmp string
			switch store {
			case "memory", "":
			case "sqlite":
				dir, err := os.MkdirTemp("", "drover-sim-")
				if err != nil {
					return &exitError{1, err}
				}
				defer os.RemoveAll(dir)
				tmp = dir
			default:
				return &exitError{2, fmt.Errorf("--store %q: must be memory or sqlite", store)}
			}
			var group *bool
			switch groupCommit {
			case "seed", "":
			case "on", "off":
				on := groupCommit == "on"
				group = &on
			default:
				return &exitError{2, fmt.Errorf("--group-commit %q: must be on, off or seed", groupCommit)}
			}
			if breakFencing && store == "sqlite" {
				return &exitError{2, fmt.Errorf("--break-fencing needs --store memory")}
			}
			out := cmd.OutOrStdout()
			// Runs go in chunks, each printed in seed order once it is done,
			// so that memory does not grow with --runs.
			par := runtime.GOMAXPROCS(0)
			chunk := min(runs, simChunk*par)
			results := make([]testkit.SimResult, chunk)
			errs := make([]error, chunk)
			failed := 0
			for first := 0; first < runs; first += chunk {
				n := min(chunk, runs-first)
				var wg sync.WaitGroup
				sem := make(chan struct{}, par)
				for i := 0; i < n; i++ {
					wg.Add(1)
					sem <- struct{}{}
					go func(i int) {
						defer wg.Done()
						defer func() { <-sem }()
						s := seed + uint64(first+i)
						opt := testkit.SimOptions{BreakFencing: breakFencing, GroupCommit: group}
						if tmp != "" {
							path := filepath.Join(tmp, fmt.Sprintf("seed-%d.db", s))
							opt.Store = func(c *testkit.Clock) (persistence.Store, error) {
								return sqlite.Open(cmd.Context(), path, sqlite.Config{Clock: c})
							}
							defer func() {
								for _, suffix := range []string{"", "-wal", "-shm"} {
									_ = os.Remove(path + suffix)
								}
							}()
						}
						results[i], errs[i] = testkit.RandomRun(s, opt)
					}(i)
				}
				wg.Wait()
				for i, r := range results[:n] {
					if errs[i] != nil {
						return &exitError{1, fmt.Errorf("seed %d: %w", seed+uint64(first+i), errs[i])}
					}
					if verbose {
						for _, s := range r.Steps {
							fmt.Fprintln(out, "  "+s)
						}
					}
					if !r.OK() {
						failed++
						fmt.Fprint(out, r.Explain())
					}
					fmt.Fprintln(out, r.Line())
				}
				clear(results)
			}
			if failed > 0 {
				return &exitError{1, fmt.Errorf("%d of %d runs broke an invariant", failed, runs)}
			}
			return nil
		},
	}
	scale = addScaleFlags(cmd)
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the (first) run")
	cmd.Flags().IntVar(&runs, "runs", 1, "run seeds seed..seed+runs-1")
	cmd.Flags().StringVar(&store, "store", "memory", "store under test: memory or sqlite (a temporary file per run)")
	cmd.Flags().StringVar(&groupCommit, "group-commit", "seed", "node.group_commit of every node: on, off, or seed (drawn from the seed, on in 3 runs of 4)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each run's scenario")
	cmd.Flags().BoolVar(&breakFencing, "break-fencing", false, "switch off the store's token check, to see the invariants catch it")
	_ = cmd.Flags().MarkHidden("break-fencing")
	return cmd
}
