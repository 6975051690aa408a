package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// dlqFlags are how a dlq command finds its store (and, to replay, the
// sources' configuration).
type dlqFlags struct {
	config string
	store  string
	json   bool
	// readOnly: the command only reads (list, show). Every dlq command
	// refuses a SQLite file that does not exist; the read commands also
	// open the store read-only (no migration, no write; on PostgreSQL
	// read-only sessions).
	readOnly bool
}

func (f *dlqFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "node configuration: its store and sources")
	cmd.Flags().StringVar(&f.store, "store", "", "store URL, instead of --config (postgres://…, sqlite:PATH)")
}

// open returns the store and, when --config was given, the configuration.
// A store URL that is not valid, or names a file that does not exist, is
// bad usage (exit 2); a store that cannot be opened is a failure (exit 1).
func (f *dlqFlags) open(ctx context.Context) (persistence.Store, *config.Config, error) {
	var cfg *config.Config
	url := f.store
	if f.config != "" {
		c, err := loadConfig(f.config)
		if err != nil {
			return nil, nil, err
		}
		cfg = c
		if url == "" {
			url = c.Store.URL.Reveal()
		}
	}
	if url == "" {
		return nil, nil, &exitError{2, errors.New("--config or --store: one is required")}
	}
	if _, err := stores.Parse(url); err != nil { // bad usage; the error shows the URL masked
		return nil, nil, &exitError{2, fmt.Errorf("--store: %w", err)}
	}
	s, err := stores.Open(ctx, url, stores.Options{MustExist: true, ReadOnly: f.readOnly})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &exitError{2, err}
	}
	if err != nil {
		return nil, nil, &exitError{1, err}
	}
	return s, cfg, nil
}

// openIDs parses dead-letter ids, then opens the store; the caller closes it.
func (f *dlqFlags) openIDs(ctx context.Context, args []string) ([]int64, persistence.Store, *config.Config, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, nil, nil, err
	}
	s, cfg, err := f.open(ctx)
	return ids, s, cfg, err
}

func newDLQ() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq list|show|replay|resolve",
		Short: "dead letters: list, show, replay or resolve them",
		Long: `dlq manages dead letters: messages that could not be applied, kept with
their reason in drover_dead_letters.

  dlq list    [--source S] [--status pending|replayed|resolved] [--limit N] [--json]
  dlq show    ID [--json | --raw > FILE]
  dlq replay  ID... --config drover.yaml     apply again through the source's decode
                                              and apply path as configured now
  dlq resolve ID...                           mark handled by hand

replay is fenced like any apply: it runs under the unit's current lease token
and does not move the checkpoint. A dead letter that still cannot be applied
stays pending with one more attempt and the new reason.

The store must exist: a SQLite path that names no file is refused (exit
2), never created. list and show open it read-only.

Keys, payloads, positions and reasons come from producers. The text output
writes every control character (ESC, CR, C1 controls, ...) and every
bidirectional override as an escape (\x1b, \r, \u202e), to a terminal, a
pipe or a file alike, so that a payload cannot drive the terminal. --json
escapes them as JSON does. show --raw writes only the payload's bytes, as
they are, and refuses to write them to a terminal.`,
	}
	cmd.AddCommand(newDLQList(), newDLQShow(), newDLQReplay(), newDLQResolve())
	return cmd
}

func newDLQList() *cobra.Command {
	var (
		f      dlqFlags
		source string
		status string
		limit  int
		after  int64
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list dead letters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "", "pending", "replayed", "resolved":
			default:
				return &exitError{2, fmt.Errorf("--status %q: must be pending, replayed or resolved", status)}
			}
			f.readOnly = true
			s, _, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			return listDeadLetters(cmd.Context(), s, persistence.DeadLetterFilter{Source: source,
				Status: persistence.DeadLetterStatus(status), AfterID: after, Limit: limit}, cmd.OutOrStdout(), f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&source, "source", "", "only this source")
	cmd.Flags().StringVar(&status, "status", "pending", "pending, replayed or resolved (empty: all)")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many (0: all)")
	cmd.Flags().Int64Var(&after, "after", 0, "ids after this one (paging)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	return cmd
}

// listDeadLetters writes the dead letters f selects, as a table or JSON.
func listDeadLetters(ctx context.Context, s persistence.DeadLetters, f persistence.DeadLetterFilter, out io.Writer, asJSON bool) error {
	dls, err := s.DeadLetters(ctx, f)
	if err != nil {
		return &exitError{1, err}
	}
	if asJSON {
		return writeJSON(out, jsonDeadLetters(dls, false))
	}
	if len(dls) == 0 {
		fmt.Fprintln(out, "no dead letters")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSOURCE\tUNIT\tPOSITION\tSTATUS\tATTEMPTS\tLAST FAILED\tREASON")
	for _, d := range dls {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, oneLine(d.Source), oneLine(d.Unit), oneLine(d.Position),
			oneLine(string(d.Status)), d.Attempts, d.LastFailedAt.UTC().Format(time.RFC3339), clipLine(d.Reason, 80))
	}
	return w.Flush()
}

func newDLQShow() *cobra.Command {
	var (
		f   dlqFlags
		raw bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "show one dead letter with its payload",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if raw && f.json {
				return &exitError{2, errors.New("--raw and --json: choose one")}
			}
			if raw && isTerminal(out) {
				return &exitError{2, errors.New("--raw writes the payload's bytes as they are, terminal escape sequences included, " +
					"and stdout is a terminal: redirect it (drover dlq show ID --raw > payload.bin), or leave out --raw to see the payload escaped")}
			}
			f.readOnly = true
			ids, s, _, err := f.openIDs(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer s.Close()
			return showDeadLetter(cmd.Context(), s, ids[0], out, raw, f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	cmd.Flags().BoolVar(&raw, "raw", false, "write only the payload's bytes, unescaped (refused when stdout is a terminal)")
	return cmd
}

// showDeadLetter writes one dead letter with its payload: escaped text,
// JSON, or (raw) the payload's bytes alone.
func showDeadLetter(ctx context.Context, s persistence.DeadLetters, id int64, out io.Writer, raw, asJSON bool) error {
	d, err := s.DeadLetter(ctx, id)
	if err != nil {
		return &exitError{1, err}
	}
	if raw {
		_, err := out.Write(d.Payload)
		return err
	}
	if asJSON {
		return writeJSON(out, jsonDeadLetters([]persistence.DeadLetter{d}, true)[0])
	}
	size := fmt.Sprintf("%d bytes", len(d.Payload))
	if d.Cut() {
		size = fmt.Sprintf("%d of %d bytes: cut at dead_letter_max_bytes", len(d.Payload), d.PayloadBytes)
	}
	fmt.Fprintf(out, "id:          %d\nsource:      %s\nunit:        %s\nposition:    %s\nkey:         %s\nstatus:      %s\nattempts:    %d\nfirst failed %s\nlast failed  %s\nreason:      %s\npayload (%s):\n%s\n",
		d.ID, oneLine(d.Source), oneLine(d.Unit), oneLine(d.Position), oneLine(d.MsgKey), oneLine(string(d.Status)), d.Attempts,
		d.FirstFailedAt.UTC().Format(time.RFC3339Nano), d.LastFailedAt.UTC().Format(time.RFC3339Nano),
		escapeTerminal(d.Reason, true), size, printable(d.Payload))
	return nil
}

func newDLQReplay() *cobra.Command {
	var f dlqFlags
	cmd := &cobra.Command{
		Use:   "replay ID... --config drover.yaml",
		Short: "apply dead letters again through their source's decode and apply path",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.config == "" {
				return &exitError{2, errors.New("--config: required to replay (the sources' decoding comes from it)")}
			}
			ids, s, cfg, err := f.openIDs(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer s.Close()
			return replayDeadLetters(cmd.Context(), s, cfg, ids, cmd.OutOrStdout())
		},
	}
	f.add(cmd)
	return cmd
}

// replayDeadLetters replays each of ids, one line of outcome each; it
// fails (exit 1) when any of them was not replayed.
func replayDeadLetters(ctx context.Context, s actors.ReplayStore, cfg *config.Config, ids []int64, out io.Writer) error {
	failed := 0
	for _, id := range ids {
		msg, err := replayOne(ctx, s, cfg, id)
		if err != nil {
			failed++
			fmt.Fprintf(out, "%d: %s\n", id, escapeTerminal(err.Error(), false))
			continue
		}
		fmt.Fprintf(out, "%d: %s\n", id, msg)
	}
	if failed > 0 {
		return &exitError{1, fmt.Errorf("%d of %d dead letters not replayed", failed, len(ids))}
	}
	return nil
}

func replayOne(ctx context.Context, s actors.ReplayStore, cfg *config.Config, id int64) (string, error) {
	d, err := s.DeadLetter(ctx, id)
	if err != nil {
		return "", err
	}
	var src *config.Source
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == d.Source {
			src = &cfg.Sources[i]
		}
	}
	if src == nil {
		return "", fmt.Errorf("source %q is not in the configuration", d.Source)
	}
	spec := actors.SourceSpec{Name: src.Name, Table: src.Records.Table, KeyField: src.Records.Key, MaxMessageBytes: src.MaxMessageBytes,
		MaxDeadLetterBytes: src.DeadLetterMaxBytes, Format: decode.Format(src.Decoding.Format)}
	if spec.Registry, err = src.Decoding.NewRegistry(); err != nil { // a wire format's schemas
		return "", fmt.Errorf("source %s: %w", src.Name, err)
	}
	if src.Mode == "handler" {
		h, ok := builtinHandlers()[src.HandlerName]
		if !ok {
			return "", fmt.Errorf("source %s uses handler %q, which lives in your program: replay it there with actors.Replay", src.Name, src.HandlerName)
		}
		spec.Handler = h
	}
	res, err := actors.Replay(ctx, s, spec, id)
	if err != nil {
		return "", err
	}
	if !res.Applied {
		return "", fmt.Errorf("still cannot be applied: %s (kept pending, attempt %d)", res.Reason, d.Attempts+1)
	}
	return "replayed", nil
}

func newDLQResolve() *cobra.Command {
	var f dlqFlags
	cmd := &cobra.Command{
		Use:   "resolve ID...",
		Short: "mark dead letters as handled by hand",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, s, _, err := f.openIDs(cmd.Context(), args)
			if err != nil {
				return err
			}
			defer s.Close()
			return resolveDeadLetters(cmd.Context(), s, ids, cmd.OutOrStdout())
		},
	}
	f.add(cmd)
	return cmd
}

// resolveDeadLetters marks each of ids resolved, stopping at the first
// that cannot be.
func resolveDeadLetters(ctx context.Context, s persistence.DeadLetters, ids []int64, out io.Writer) error {
	for _, id := range ids {
		if err := s.SetDeadLetterStatus(ctx, id, persistence.DeadLetterResolved); err != nil {
			return &exitError{1, fmt.Errorf("resolve %d: %w", id, err)}
		}
		fmt.Fprintf(out, "%d: resolved\n", id)
	}
	return nil
}

func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, &exitError{2, fmt.Errorf("%q: a dead letter id is a positive number", a)}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

type deadLetterJSON struct {
	ID            int64     `json:"id"`
	Source        string    `json:"source"`
	Unit          string    `json:"unit"`
	Position      string    `json:"position"`
	MsgKey        string    `json:"msg_key"`
	Reason        string    `json:"reason"`
	Attempts      int       `json:"attempts"`
	Status        string    `json:"status"`
	FirstFailedAt time.Time `json:"first_failed_at"`
	LastFailedAt  time.Time `json:"last_failed_at"`
	Payload       *string   `json:"payload,omitempty"`
}

func jsonDeadLetters(dls []persistence.DeadLetter, payload bool) []deadLetterJSON {
	out := make([]deadLetterJSON, 0, len(dls))
	for _, d := range dls {
		j := deadLetterJSON{ID: d.ID, Source: d.Source, Unit: d.Unit, Position: d.Position, MsgKey: d.MsgKey, Reason: d.Reason,
			Attempts: d.Attempts, Status: string(d.Status), FirstFailedAt: d.FirstFailedAt.UTC(), LastFailedAt: d.LastFailedAt.UTC()}
		if payload {
			p := string(d.Payload)
			j.Payload = &p
		}
		out = append(out, j)
	}
	return out
}

// writeJSON writes v as indented JSON, with the runes a terminal acts on
// escaped (escapeJSON).
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(buf.Bytes()))
	return err
}

// oneLine is a producer's text for one line of output: escaped for the
// terminal (escapeTerminal), newlines and tabs included.
func oneLine(s string) string { return escapeTerminal(s, false) }

// clipLine is s on one line, at most n bytes of it (cut at a rune), escaped
// for the terminal.
func clipLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return escapeTerminal(s[:runeCut(s, n)], false) + "…"
	}
	return escapeTerminal(s, false)
}

// runeCut is the largest index <= n that does not cut a UTF-8 rune of s.
func runeCut[T string | []byte](s T, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// printable shows a payload as text when it is UTF-8, escaped for the
// terminal (newlines and tabs kept), else as a hex dump.
func printable(b []byte) string {
	if utf8.Valid(b) {
		if len(b) > 64<<10 {
			return escapeTerminal(string(b[:runeCut(b, 64<<10)]), true) + "\n… (truncated)"
		}
		return escapeTerminal(string(b), true)
	}
	return fmt.Sprintf("% x", b[:min(len(b), 4096)])
}
