package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/cluster/debug"
)

func newEvents() *cobra.Command {
	var (
		addr, unit, source, since, token string
		cluster, asJSON, audit           bool
		limit                            int
		timeout                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "events [--addr URL] [--unit U] [--source S] [--since T] [--limit N] [--cluster] [--json] [--token T]",
		Short: "print why units are where they are: placement, leases, takeovers, restarts, resets, controls",
		Long: `events asks a node's debug endpoint (GET /debug/events) for its log of
what happened to its units and prints it oldest first, one event a line:
placement decisions (assigned, given_up, with the size of the view),
lease acquisitions, takeovers (the holder and token taken over, and the
new token), lease losses and releases, restarts with their error, position
resets, and operators' controls. --cluster merges every live member's log
by time (?scope=cluster) and adds a member_gone line for each member that
left the view in the last minutes (for --unit, when it held the unit).

--unit orders/3 and --source orders select; --since takes an RFC 3339
time or a duration (10m: the last ten minutes); --limit keeps the last N
(default 1000). Terminal controls in what the nodes send are written as
escapes (\x1b, \u202e), in the text and in --json alike.

--audit prints the store's audit of controls instead (GET /debug/audit:
drover_control_audit, every pause, resume, seek, drain, undrain, exit and
reload with who, why and the node that took it); it is the whole
cluster's and survives restarts, so --cluster adds nothing to it.

--addr takes a URL or host:port (http:// is assumed). The token is --token
or the environment variable DROVER_DEBUG_TOKEN.

Exit status: 0 printed, 1 the endpoint could not be reached or refused,
2 bad flags.`,
		Example: `  drover events --unit orders/3 --cluster
  drover events --addr 127.0.0.1:7071 --source orders --since 10m
  DROVER_DEBUG_TOKEN=… drover events --cluster --json | jq .`,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return &exitError{2, fmt.Errorf("--timeout %v: must be positive", timeout)}
			}
			if limit < 1 || limit > debug.MaxEventsLimit {
				return &exitError{2, fmt.Errorf("--limit %d: must be from 1 to %d", limit, debug.MaxEventsLimit)}
			}
			u, err := eventsURL(addr, cluster && !audit, url.Values{"unit": {unit}, "source": {source}, "since": {since}, "limit": {strconv.Itoa(limit)}})
			if err != nil {
				return &exitError{2, err}
			}
			if audit {
				u = strings.Replace(u, "/debug/events", "/debug/audit", 1)
			}
			if token == "" {
				token = os.Getenv(treeTokenEnv)
			}
			body, err := fetchTree(cmd.Context(), u, token, timeout)
			if err != nil {
				return &exitError{1, err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSONBody(out, body)
			}
			if audit {
				var a debug.AuditAnswer
				if err := json.Unmarshal(body, &a); err != nil {
					return &exitError{1, fmt.Errorf("%s did not answer with the audit: %w", u, err)}
				}
				writeAudit(terminalWriter{out}, a, time.Local)
				return nil
			}
			var a debug.EventsAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				return &exitError{1, fmt.Errorf("%s did not answer with events: %w", u, err)}
			}
			writeEvents(terminalWriter{out}, a, time.Local)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "http://"+debug.DefaultAddr, "debug endpoint of a node: URL or host:port")
	f.StringVar(&unit, "unit", "", "only this unit (source/partition)")
	f.StringVar(&source, "source", "", "only this source")
	f.StringVar(&since, "since", "", "only events at or after this time (RFC 3339) or this long ago (10m)")
	f.IntVar(&limit, "limit", debug.DefaultEventsLimit, "print the last N events")
	f.BoolVar(&cluster, "cluster", false, "merge every live member's events")
	f.BoolVar(&asJSON, "json", false, "print the endpoint's JSON")
	f.BoolVar(&audit, "audit", false, "print the store's audit of controls instead")
	f.StringVar(&token, "token", "", "debug token (default $"+treeTokenEnv+")")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "give up on the endpoint after this long")
	return cmd
}

// writeAudit prints one line per control carried out:
//
//	2026-12-02 01:00:04.120  node-2  pause  orders/3  by ann  poison at 1234
func writeAudit(w io.Writer, a debug.AuditAnswer, loc *time.Location) {
	for _, e := range a.Entries {
		target := e.Unit
		if target == "" {
			target = e.Source
		}
		if target == "" {
			target = "-"
		}
		line := fmt.Sprintf("%s  %s  %s  %s", e.At.In(loc).Format("2006-01-02 15:04:05.000"), e.Node, e.Action, target)
		if e.By != "" {
			line += "  by " + e.By
		}
		if e.Args != "" {
			line += "  " + e.Args
		}
		if e.Reason != "" {
			line += "  " + e.Reason
		}
		fmt.Fprintln(w, line)
	}
	if len(a.Entries) == 0 {
		fmt.Fprintln(w, "no control in the audit")
	}
}

// eventsURL turns --addr into the URL of the events route with the
// filters q (empty ones left out), accepting what treeURL accepts.
func eventsURL(addr string, cluster bool, q url.Values) (string, error) {
	t, err := treeURL(addr, cluster)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(t)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/debug/tree") + "/debug/events"
	v := u.Query()
	for k, vs := range q {
		if len(vs) > 0 && vs[0] != "" {
			v.Set(k, vs[0])
		}
	}
	u.RawQuery = v.Encode()
	return u.String(), nil
}

// writeEvents prints one line per event, then the members that did not
// answer:
//
//	2026-12-02 01:00:04.120  node-2  orders/0  takeover  token 7 (from node-1, token 6)  node-1 (token 6) is not in this node's view …
func writeEvents(w io.Writer, a debug.EventsAnswer, loc *time.Location) {
	if len(a.Events) == 0 {
		fmt.Fprintln(w, "(no events)")
	}
	nodeW, whatW, kindW := 0, 0, 0
	for _, e := range a.Events {
		nodeW, whatW, kindW = max(nodeW, len(e.Node)), max(whatW, len(eventWhat(e))), max(kindW, len(e.Kind))
	}
	for _, e := range a.Events {
		line := fmt.Sprintf("%s  %-*s  %-*s  %-*s", e.Time.In(loc).Format("2006-01-02 15:04:05.000"),
			nodeW, e.Node, whatW, eventWhat(e), kindW, e.Kind)
		if d := eventDetail(e); d != "" {
			line += "  " + d
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	for _, n := range a.Nodes {
		if n.Error != "" {
			fmt.Fprintf(w, "%s did not answer: %s\n", n.Node, treeOneLine(n.Error, 300))
		}
	}
}

// eventWhat is what an event is about: its unit, else its source, else -.
func eventWhat(e events.Event) string {
	switch {
	case e.Unit != "":
		return e.Unit
	case e.Source != "":
		return e.Source
	}
	return "-"
}

func eventDetail(e events.Event) string {
	var parts []string
	if e.Action != "" {
		parts = append(parts, e.Action)
	}
	if e.By != "" {
		parts = append(parts, "by "+e.By)
	}
	switch {
	case e.PrevOwner != "" && e.Token != 0:
		parts = append(parts, fmt.Sprintf("token %d (from %s, token %d)", e.Token, e.PrevOwner, e.PrevToken))
	case e.Token != 0 && e.PrevToken != 0:
		parts = append(parts, fmt.Sprintf("token %d (after token %d)", e.Token, e.PrevToken))
	case e.Token != 0:
		parts = append(parts, fmt.Sprintf("token %d", e.Token))
	}
	if e.Members > 0 {
		parts = append(parts, fmt.Sprintf("view of %d", e.Members))
	}
	if e.Reason != "" {
		parts = append(parts, treeOneLine(e.Reason, 0))
	}
	return strings.Join(parts, "  ")
}
