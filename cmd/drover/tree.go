package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/debug"
)

// treeTokenEnv is where `drover tree` finds the debug token without --token.
const treeTokenEnv = "DROVER_DEBUG_TOKEN"

func newTree() *cobra.Command {
	var (
		addr      string
		wholeTree bool
		asJSON    bool
		token     string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "tree [--addr URL] [--cluster] [--json] [--token T]",
		Short: "print the actor tree of a node, or of the whole cluster",
		Long: `tree asks a node's debug endpoint (node.debug_addr) for its actor tree and
prints it as an indented tree: the node and its members (and "drained" while
it is drained), the outcome of its last config reload, each source, and
each unit with its state, lease token, position, lag (messages behind; in
brackets, when over 0, the age of its oldest message not applied yet),
counters, restarts, last error and next retry. --cluster asks for every
live member's tree (GET /debug/tree?scope=cluster): one block per node, a
node that does not answer shows its error instead of its sources. --json prints the JSON the
endpoint returned. Terminal controls in either (ESC, C1 controls,
bidirectional overrides) are written as escapes (\x1b, \u202e).

--addr takes a URL or host:port (http:// is assumed). The token is --token
or the environment variable DROVER_DEBUG_TOKEN.

Exit status: 0 printed, 1 the endpoint could not be reached or refused,
2 bad flags.`,
		Example: `  drover tree
  drover tree --addr 127.0.0.1:7071 --cluster
  DROVER_DEBUG_TOKEN=… drover tree --addr http://10.0.0.5:7070 --cluster --json | jq .`,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return &exitError{2, fmt.Errorf("--timeout %v: must be positive", timeout)}
			}
			u, err := treeURL(addr, wholeTree)
			if err != nil {
				return &exitError{2, err}
			}
			if token == "" {
				token = os.Getenv(treeTokenEnv)
			}
			body, err := fetchTree(cmd.Context(), u, token, timeout)
			if err != nil {
				return &exitError{1, err}
			}
			// Names, positions and errors come from the nodes (and, through
			// the cluster view, from every member): terminal controls in
			// them are escaped, in the text tree and in the JSON alike.
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSONBody(out, body)
			}
			if wholeTree {
				var ct debug.ClusterTree
				if err := json.Unmarshal(body, &ct); err != nil {
					return &exitError{1, fmt.Errorf("%s did not answer with a cluster tree: %w", u, err)}
				}
				writeClusterTree(terminalWriter{out}, ct, time.Local)
				return nil
			}
			var t actors.Tree
			if err := json.Unmarshal(body, &t); err != nil {
				return &exitError{1, fmt.Errorf("%s did not answer with a tree: %w", u, err)}
			}
			writeNodeTree(terminalWriter{out}, debug.NodeTree{Tree: t}, time.Local)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "http://"+debug.DefaultAddr, "debug endpoint of a node: URL or host:port")
	f.BoolVar(&wholeTree, "cluster", false, "print every live member's tree")
	f.BoolVar(&asJSON, "json", false, "print the endpoint's JSON instead of the text tree")
	f.StringVar(&token, "token", "", "debug token (default $"+treeTokenEnv+")")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "give up on the endpoint after this long")
	return cmd
}

// treeURL turns --addr into the URL of the tree route. It accepts
// host:port, a base URL, or a URL already ending in /debug or /debug/tree
// (a path prefix before them is kept, for endpoints behind a proxy).
func treeURL(addr string, wholeTree bool) (string, error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", errors.New("--addr is empty: give the node's debug address, e.g. 127.0.0.1:7070")
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--addr %q: scheme %q: must be http or https", addr, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("--addr %q: no host", addr)
	}
	p := strings.TrimSuffix(u.Path, "/")
	p = strings.TrimSuffix(p, "/debug/tree")
	p = strings.TrimSuffix(p, "/debug")
	u.Path = p + "/debug/tree"
	u.RawPath = ""
	q := u.Query()
	q.Del("scope")
	if wholeTree {
		q.Set("scope", "cluster")
	}
	u.RawQuery = q.Encode()
	u.Fragment = ""
	return u.String(), nil
}

// writeJSONBody writes an endpoint's JSON answer for --json, terminal
// controls escaped, ending in a newline.
func writeJSONBody(out io.Writer, body []byte) error {
	if _, err := out.Write(escapeJSON(body)); err != nil {
		return &exitError{1, err}
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(out)
	}
	return nil
}

// fetchTree GETs the tree and returns its body, or an error that names the
// address and says what to do about it.
func fetchTree(ctx context.Context, u, token string, timeout time.Duration) ([]byte, error) {
	body, code, err := endpointDo(ctx, http.MethodGet, u, token, nil, timeout, 64<<20)
	if err != nil {
		return nil, err
	}
	switch {
	case code == http.StatusUnauthorized && token == "":
		return nil, fmt.Errorf("the debug endpoint at %s needs its token (%s): pass --token or set %s", u, statusText(code), treeTokenEnv)
	case code == http.StatusUnauthorized:
		return nil, fmt.Errorf("the debug endpoint at %s refused the token (%s): it must equal the node's node.debug_token", u, statusText(code))
	case code != http.StatusOK:
		return nil, fmt.Errorf("the debug endpoint at %s answered %s: %s", u, statusText(code), treeOneLine(string(body), 300))
	}
	return body, nil
}

// endpointDo sends one request to a debug endpoint (body JSON when not
// nil) and returns the answer's body, at most limit bytes, and status; an
// error names the address and says what to check. A control (a body) is
// never redirected; a read follows redirects as net/http does (which
// drops the token on a redirect to another host).
func endpointDo(ctx context.Context, method, u, token string, body io.Reader, timeout time.Duration, limit int64) ([]byte, int, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: tr, Timeout: timeout}
	if body != nil {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, 0, fmt.Errorf("request %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, fmt.Errorf("cannot reach the debug endpoint at %s: %v (is the node running, and is --addr its node.debug_addr?)", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("read the answer of %s: %w", u, err)
	}
	return b, resp.StatusCode, nil
}

// statusText is "401 Unauthorized" for 401.
func statusText(code int) string { return fmt.Sprintf("%d %s", code, http.StatusText(code)) }

// writeClusterTree prints one block per node, then a summary line that
// also names any unit listed by more than one node.
func writeClusterTree(w io.Writer, ct debug.ClusterTree, loc *time.Location) {
	owners := map[string][]string{}
	units, silent := 0, 0
	for i, n := range ct.Nodes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeNodeTree(w, n, loc)
		if n.Error != "" {
			silent++
			continue
		}
		for _, s := range n.Sources {
			for _, u := range s.Units {
				units++
				owners[u.Unit] = append(owners[u.Unit], n.Node)
			}
		}
	}
	fmt.Fprintln(w)
	nodes := treePlural(len(ct.Nodes), "node")
	if silent > 0 {
		nodes += fmt.Sprintf(" (%d not answering)", silent)
	}
	fmt.Fprintf(w, "cluster: %s, %s\n", nodes, treePlural(units, "unit"))
	var twice []string
	for u, ns := range owners {
		if len(ns) > 1 {
			twice = append(twice, fmt.Sprintf("%s (%s)", u, strings.Join(ns, ", ")))
		}
	}
	if len(twice) > 0 {
		sort.Strings(twice)
		fmt.Fprintf(w, "on more than one node: %s\n", strings.Join(twice, "; "))
	}
}

// writeNodeTree prints one node:
//
//	node-1 (members: node-1 alive, node-2 alive, node-3 leaving)  drained (out of placement until undrained)
//	   last reload 11:58:00: reloaded: added orders
//	└─ orders [kafka] running
//	   ├─ orders/0  running   token 7  pos 1234  lag 0  recv 1300 applied 1290 dl 10 restarts 0
//	   └─ orders/3  retrying  token 2  … last error: fetch: broker unreachable, retry at 12:00:03
func writeNodeTree(w io.Writer, n debug.NodeTree, loc *time.Location) {
	if n.Error != "" {
		fmt.Fprintf(w, "%s (not answering)\n", n.Node)
		fmt.Fprintf(w, "└─ error: %s\n", treeOneLine(n.Error, 0))
		return
	}
	members := make([]string, 0, len(n.Members))
	for _, m := range n.Members {
		members = append(members, m.Name+" "+m.State)
	}
	if len(members) == 0 {
		members = append(members, "none")
	}
	drained := ""
	if n.Drained {
		drained = "  drained (out of placement until undrained)"
	}
	fmt.Fprintf(w, "%s (members: %s)%s\n", n.Node, strings.Join(members, ", "), drained)
	if r := n.Reload; r != nil {
		fmt.Fprintf(w, "   last reload %s: %s\n", r.At.In(loc).Format(time.TimeOnly), treeOneLine(r.Summary(), 0))
	}
	if len(n.Sources) == 0 {
		fmt.Fprintln(w, "└─ (no sources)")
		return
	}
	for i, s := range n.Sources {
		branch, indent := "├─ ", "│  "
		if i == len(n.Sources)-1 {
			branch, indent = "└─ ", "   "
		}
		line := fmt.Sprintf("%s [%s] %s", s.Name, s.Type, s.State)
		if s.Quality != nil {
			line += "  quality " + s.Quality.Status
		}
		if s.Error != "" {
			line += "  error: " + treeOneLine(s.Error, 0)
		}
		fmt.Fprintln(w, branch+line)
		if len(s.Units) == 0 {
			fmt.Fprintln(w, indent+"└─ (no units on this node)")
			continue
		}
		idW, stW := 0, 0
		for _, u := range s.Units {
			idW, stW = max(idW, len(u.Unit)), max(stW, len(u.State))
		}
		for j, u := range s.Units {
			b := "├─ "
			if j == len(s.Units)-1 {
				b = "└─ "
			}
			fmt.Fprintln(w, indent+b+treeUnitLine(u, idW, stW, loc))
		}
	}
}

func treeUnitLine(u actors.UnitStatus, idW, stW int, loc *time.Location) string {
	pos := u.Position
	if pos == "" {
		pos = "-"
	}
	lag := strconv.FormatInt(u.Lag, 10)
	if u.LagSeconds > 0 {
		// the age of the oldest message not applied yet
		lag += " (" + strconv.FormatFloat(u.LagSeconds, 'f', -1, 64) + "s)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  token %d  pos %s  lag %s  recv %d applied %d dl %d restarts %d",
		idW, u.Unit, stW, u.State, u.LeaseToken, pos, lag, u.Received, u.Applied, u.DeadLettered, u.Restarts)
	if u.Acked > 0 {
		fmt.Fprintf(&b, " acked %d", u.Acked)
	}
	if u.Rejected > 0 {
		fmt.Fprintf(&b, " rejected %d", u.Rejected)
	}
	switch {
	case u.LastError != "" && u.NextRetryAt != nil:
		fmt.Fprintf(&b, "  last error: %s, retry at %s", treeOneLine(u.LastError, 0), u.NextRetryAt.In(loc).Format(time.TimeOnly))
	case u.LastError != "":
		fmt.Fprintf(&b, "  last error: %s", treeOneLine(u.LastError, 0))
	case u.NextRetryAt != nil:
		fmt.Fprintf(&b, "  retry at %s", u.NextRetryAt.In(loc).Format(time.TimeOnly))
	}
	return b.String()
}

// treeOneLine folds s onto one line and, when limit > 0, cuts it to limit
// runes.
func treeOneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); limit > 0 && len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return s
}

func treePlural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
