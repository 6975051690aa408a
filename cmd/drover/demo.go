package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/cluster/demo"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence/stores"
)

func newDemo() *cobra.Command {
	var (
		nodes     int
		rate      int
		duration  time.Duration
		kills     []string
		restart   bool
		restartIn time.Duration
		verify    bool
		dir       string
		seed      uint64
		storeURL  string
		keep      bool
		chaos     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "demo [--nodes 3] [--rate 200] [--duration 30s --verify] [--kill node-2@10s [--restart]] [--chaos 3m --verify]",
		Short: "run a local cluster on embedded parts, with load and a verdict",
		Long: `demo starts an in-process Kafka (kfake on 127.0.0.1:19092, topic "orders" with 12
partitions), a SQLite store in ./drover-demo/, and --nodes node PROCESSES of this
binary on loopback (real memberlist on 17946+, debug pages on 17071+), then
produces --rate messages per second: JSON orders, updates, tombstones, _deleted
markers, Debezium changes, and some malformed, unkeyed and oversize messages.

Two sources read the topic: "orders" applies it to the orders table, "audit"
records every message it applies in drover_audit (handler mode) so that lost
and duplicated messages can be counted exactly. One message in four also goes
as an Avro order (Confluent wire format, schema in an in-process schema
registry on 127.0.0.1:18081) to the topic "orders_avro" (4 partitions), which
the source "orders_avro" decodes (decode.format avro) into its table.

--kill node-2@10s kill -9s that node 10 s in (repeatable); --restart brings
it back after --restart-after. With --duration the demo stops producing, waits
for the cluster to drain and, with --verify, compares the store with what was
produced; its last line is
  verified: produced=<n> applied=<n> dead_lettered=<n> lost=<n> duplicated=<n> moved=<n> failover=<seconds>
and it exits 1 unless lost=0 duplicated=0. Without --duration it runs until
Ctrl-C.

--chaos 3m produces for 3 minutes while, every 2–8 s, it kill -9s, SIGTERMs or
restarts a random node process (at least one always runs) or cuts one node's
store connections for 2–6 s (its store proxy drops them and refuses new ones,
then accepts again). Store connections need a networked store, so --chaos runs
on PostgreSQL: a throwaway server started from the local binaries
(/usr/lib/postgresql/*/bin), or --store postgres://… (an empty database); each
node reaches it through its own TCP proxy in the demo process. It prints one
"chaos: …" line per action. When the window ends it restarts every stopped
node, restores every proxy, drains and, with --verify, verifies; the verdict
ends with kills=<n> terms=<n> restarts=<n> cuts=<n>. The randomness comes from
--seed (with --chaos the default is time-based and printed), so a run can be
repeated as far as OS timing allows.


--dir must be new, empty or a previous demo's (it holds the file
.drover-demo the demo writes): the demo replaces drover.db*, node-*.yaml,
node-*.log and nats/ in it, and refuses any other directory (exit 2)
before it removes anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if chaos < 0 {
				return &exitError{2, fmt.Errorf("--chaos %s: must be positive", chaos)}
			}
			if chaos > 0 {
				switch {
				case duration > 0:
					return &exitError{2, fmt.Errorf("--chaos is the duration: drop --duration")}
				case len(kills) > 0 || restart:
					return &exitError{2, fmt.Errorf("--chaos chooses its own kills and restarts: drop --kill and --restart")}
				case storeURL != "" && !networkedStore(storeURL):
					return &exitError{2, fmt.Errorf("--chaos cuts store connections, so it needs a networked store: --store postgres://…, or no --store for a throwaway PostgreSQL")}
				}
				if !cmd.Flags().Changed("seed") {
					seed = uint64(time.Now().UnixNano())
				}
				fmt.Fprintf(out, "chaos: seed %d (repeat with --seed %d)\n", seed, seed)
			}
			plan := demo.Plan{Rate: rate, Duration: duration, Verify: verify, Seed: seed, Chaos: chaos}
			for _, k := range kills {
				kl, err := demo.ParseKill(k)
				if err != nil {
					return &exitError{2, err}
				}
				plan.Kills = append(plan.Kills, kl)
			}
			if restart {
				plan.Restart = restartIn
			}
			if verify && duration <= 0 && chaos <= 0 {
				return &exitError{2, fmt.Errorf("--verify needs --duration")}
			}
			if storeURL != "" {
				if _, err := stores.Parse(storeURL); err != nil {
					return &exitError{2, fmt.Errorf("--store: %w", err)}
				}
			}
			bin, err := os.Executable()
			if err != nil {
				return &exitError{1, err}
			}
			// before anything in it is removed
			if err := demo.ClaimDir(dir); errors.Is(err, demo.ErrNotDemoDir) {
				return &exitError{2, fmt.Errorf("--dir: %w", err)}
			} else if err != nil {
				return &exitError{1, fmt.Errorf("--dir: %w", err)}
			}
			if !keep {
				for _, pat := range []string{"drover.db*", "node-*.yaml", "node-*.log"} {
					old, _ := filepath.Glob(filepath.Join(dir, pat))
					for _, f := range old {
						_ = os.Remove(f)
					}
				}
			}
			if chaos > 0 && storeURL == "" {
				pg, err := demo.StartPostgres(cmd.Context())
				if err != nil {
					return &exitError{1, fmt.Errorf("%w; or give --store postgres://…", err)}
				}
				defer func() {
					if err := pg.Close(); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
				}()
				storeURL = pg.URL()
				fmt.Fprintf(out, "throwaway PostgreSQL on %s\n", storeURL)
			}
			c, err := demo.Start(demo.Config{Dir: dir, Binary: bin, Nodes: nodes, StoreURL: storeURL, ProxyStore: chaos > 0,
				KafkaPort: 19092, NATSPort: 14222, PubSubPort: 18085, RegistryPort: 18081, GossipPort: 17946, DebugPort: 17071, Log: out})
			if err != nil {
				return &exitError{1, err}
			}
			defer c.Close()
			fmt.Fprintf(out, "Kafka (kfake) on %s, topics %s and %s (Avro, schema registry on %s); NATS JetStream on %s, stream JOBS; Pub/Sub (pstest) on %s, topic events; store %s\n",
				c.KafkaAddr(), demo.Topic, demo.AvroTopic, c.RegistryURL(), c.NATSURL(), c.PubSubAddr(), redact.URL(c.StoreURL()))
			if chaos > 0 {
				for _, n := range c.Nodes() {
					fmt.Fprintf(out, "%s reaches the store through its proxy: %s\n", n.Name, redact.URL(n.StoreURL))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if duration <= 0 && chaos <= 0 {
				n1 := c.Nodes()[0]
				fmt.Fprintf(out, "\nOpen http://%s/debug/ to watch the cluster live.\n", n1.DebugAddr)
				fmt.Fprintf(out, "Kill a node by hand with kill -9 <pid> (each node's pid is printed as it starts); print the tree with: drover tree --cluster --addr %s\n", n1.DebugAddr)
				fmt.Fprintf(out, "Ctrl-C stops the demo.\n\n")
			}
			v, err := c.Run(ctx, plan)
			c.Close() // before the verdict: it must be the last line
			if err != nil && ctx.Err() != nil && duration <= 0 && chaos <= 0 {
				fmt.Fprintf(out, "stopped after producing %d messages\n", v.Produced)
				return nil
			}
			for _, p := range v.Problems {
				fmt.Fprintln(out, "  "+p)
			}
			if err != nil {
				if verify {
					fmt.Fprintln(out, v.Line())
				}
				return &exitError{1, err}
			}
			if !verify && chaos > 0 {
				fmt.Fprintf(out, "chaos: kills=%d terms=%d restarts=%d cuts=%d (no --verify: nothing checked)\n", v.Kills, v.Terms, v.Restarts, v.Cuts)
			}
			if verify {
				fmt.Fprintln(out, v.Line())
				if !v.OK() {
					return &exitError{1, fmt.Errorf("lost=%d duplicated=%d", v.Lost, v.Duplicated)}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 3, "node processes to run")
	f.IntVar(&rate, "rate", 200, "messages produced per second")
	f.DurationVar(&duration, "duration", 0, "produce this long, then drain (and verify); 0: until Ctrl-C")
	f.StringArrayVar(&kills, "kill", nil, "kill -9 a node at a time: node-2@10s (repeatable)")
	f.BoolVar(&restart, "restart", false, "restart killed nodes after --restart-after")
	f.DurationVar(&restartIn, "restart-after", 5*time.Second, "how long after a kill --restart brings the node back")
	f.BoolVar(&verify, "verify", false, "compare the store with what was produced; exit 1 unless nothing was lost or doubled")
	f.StringVar(&dir, "dir", "drover-demo", "directory for configs, logs and the SQLite store: new, empty or a previous demo's (marked by "+demo.Marker+")")
	f.Uint64Var(&seed, "seed", 1, "seed of the produced workload and of the chaos (with --chaos the default is time-based)")
	f.StringVar(&storeURL, "store", "", "store URL (default sqlite:<dir>/drover.db; with --chaos a throwaway PostgreSQL)")
	f.DurationVar(&chaos, "chaos", 0, "produce this long while kill -9s, SIGTERMs, restarts and store cuts hit random nodes every 2–8 s")
	f.BoolVar(&keep, "keep", false, "keep the previous run's store instead of starting fresh")
	return cmd
}

// networkedStore says whether --store names a PostgreSQL server (the
// scheme in any case, as the store opener reads it), whose connections
// --chaos can cut.
func networkedStore(storeURL string) bool {
	t, err := stores.Parse(storeURL)
	return err == nil && t.Kind == stores.Postgres
}
