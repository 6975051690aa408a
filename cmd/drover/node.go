package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/gctune"
)

// loadConfig reads a config file; errors exit 2, one line per field.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, &exitError{2, errors.New("--config: required")}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("%s:\n%w", path, err)}
	}
	return cfg, nil
}

func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: must be text or json", format)
}

func newNode() *cobra.Command {
	var (
		path      string
		logFormat string
		grace     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "node --config drover.yaml",
		Short: "run one drover node",
		Long: `node runs one drover node until it is told to stop.

SIGTERM or SIGINT: leave gracefully — announce "leaving", let every unit
finish its batch, checkpoint and release its lease, leave the cluster — within
--grace. A second signal exits at once. POST /debug/control/exit does what
SIGTERM does (exit status 0).

SIGHUP: reload — read --config again, check it as drover check does, and
apply the difference to the sources without a restart (drover reload does the
same and prints the outcome). An invalid file changes nothing; the error is
logged and shown in the tree (reload).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			format := logFormat
			if format == "" {
				format = cfg.Log.Format
			}
			log, err := newLogger(cmd.ErrOrStderr(), format, cfg.Log.SlogLevel())
			if err != nil {
				return &exitError{2, err}
			}
			defer startGCTuning(cfg.Node.GCTuning, os.LookupEnv, log)()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sigs)
			hups := make(chan os.Signal, 1) // before Start: SIGHUP would kill the process
			signal.Notify(hups, syscall.SIGHUP)
			defer signal.Stop(hups)

			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			go func() { // a signal during start-up aborts it
				select {
				case <-sigs:
					cancel()
				case <-ctx.Done():
				}
			}()
			n, err := node.Start(ctx, cfg, node.Options{Logger: log, Version: versionString(), Handlers: builtinHandlers(), ConfigPath: path})
			cancel()
			if err != nil {
				return &exitError{1, err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s running; debug http://%s/debug/\n", cfg.Node.Name, n.DebugAddr())
			waitForStop(n, sigs, hups, log)
			sctx, scancel := context.WithTimeout(context.Background(), grace)
			defer scancel()
			done := make(chan error, 1)
			go func() { done <- n.Shutdown(sctx) }()
			select {
			case err := <-done:
				if err != nil {
					return &exitError{1, err}
				}
				log.Info("left the cluster")
				return nil
			case sig := <-sigs:
				log.Warn("second signal: exiting at once", "signal", sig.String())
				return &exitError{1, errors.New("stopped by a second signal")}
			}
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (YAML)")
	cmd.Flags().StringVar(&logFormat, "log-format", "", "text or json (default: the config's log.format)")
	cmd.Flags().DurationVar(&grace, "grace", 30*time.Second, "longest graceful stop before giving up")
	return cmd
}

// startGCTuning starts the adaptive GOGC of node.gc_tuning (gctune)
// unless it is off or the environment sets GOGC or GOMEMLIMIT (the
// operator's choice of the runtime's settings wins); the returned func
// stops it.
func startGCTuning(mode string, env func(string) (string, bool), log *slog.Logger) (stop func()) {
	if mode != "adaptive" {
		return func() {}
	}
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := env(name); ok {
			log.Info("gc tuning off: "+name+" is set", "node.gc_tuning", mode)
			return func() {}
		}
	}
	p := gctune.Default
	log.Debug("gc tuning adaptive", "gogc_min", p.Min, "gogc_max", p.Max)
	return gctune.Start(clock.Real{}, p, func(v int) { log.Debug("gc tuning: GOGC set", "gogc", v) })
}

// waitForStop runs the node until a stop signal or an exit control,
// reloading on each SIGHUP (the reload logs its outcome itself).
//
// Reloads run on a goroutine of their own, one at a time (SIGHUPs that
// come meanwhile make one more): a slow reload (a removed source still
// handing over) must not keep a SIGTERM from being acted on; Shutdown
// ends a reload in progress.
func waitForStop(n stoppable, sigs, hups <-chan os.Signal, log *slog.Logger) {
	again := make(chan struct{}, 1)
	defer close(again)
	go func() {
		for range again {
			// as drover reload: logged, in the tree, the events and the audit
			_, _ = n.Control(context.Background(), debug.ControlRequest{Action: debug.ActionReload, By: "SIGHUP"})
		}
	}()
	for {
		select {
		case sig := <-sigs:
			log.Info("signal received, leaving gracefully (signal again to exit at once)", "signal", sig.String())
			return
		case <-n.ExitRequested():
			log.Info("exit requested, leaving gracefully (signal to exit at once)")
			return
		case <-hups:
			select {
			case again <- struct{}{}:
				log.Info("SIGHUP: reloading the config")
			default:
				log.Info("SIGHUP: a reload is already waiting; it reads the file as it is then")
			}
		}
	}
}

// stoppable is what waitForStop needs of a node.
type stoppable interface {
	ExitRequested() <-chan struct{}
	Control(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error)
}

// builtinHandlers are the Go handlers a config may name with
// handler_name when it runs on the drover binary itself.
func builtinHandlers() map[string]actors.Handler {
	return map[string]actors.Handler{"audit": node.AuditHandler}
}

func newCheck() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check --config drover.yaml",
		Short: "validate a configuration; exit 2 naming the field of each error, print warnings and exit 0 when valid",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", path, w)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (node %s, %d sources, store %s)\n", path, cfg.Node.Name, len(cfg.Sources), cfg.Redacted().Store.URL)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (YAML)")
	return cmd
}
