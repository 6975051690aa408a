package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/cluster/debug"
)

// adminTokenEnv is where the control commands find the admin token
// without --token; treeTokenEnv is tried after it.
const adminTokenEnv = "DROVER_ADMIN_TOKEN"

// controlFlags are the flags every control command shares.
type controlFlags struct {
	addr    string
	token   string
	by      string
	reason  string
	timeout time.Duration
	asJSON  bool
}

func (c *controlFlags) register(cmd *cobra.Command, timeout time.Duration) {
	f := cmd.Flags()
	f.StringVar(&c.addr, "addr", "http://"+debug.DefaultAddr, "debug endpoint of a node: URL or host:port")
	f.StringVar(&c.token, "token", "", "admin token (default $"+adminTokenEnv+", then $"+treeTokenEnv+")")
	f.StringVar(&c.by, "by", "", "who asks, for the audit table (default $USER)")
	f.StringVar(&c.reason, "reason", "", "why, for the audit table")
	f.DurationVar(&c.timeout, "timeout", timeout, "give up on the endpoint after this long")
	f.BoolVar(&c.asJSON, "json", false, "print the endpoint's JSON reply")
}

// run posts req to the node and prints its reply.
func (c *controlFlags) run(cmd *cobra.Command, req debug.ControlRequest) error {
	if c.timeout <= 0 {
		return &exitError{2, fmt.Errorf("--timeout %v: must be positive", c.timeout)}
	}
	u, err := controlURL(c.addr, req.Action)
	if err != nil {
		return &exitError{2, err}
	}
	tok := c.token
	if tok == "" {
		tok = os.Getenv(adminTokenEnv)
	}
	if tok == "" {
		tok = os.Getenv(treeTokenEnv)
	}
	req.By, req.Reason = c.by, c.reason
	if req.By == "" {
		req.By = os.Getenv("USER")
	}
	body, code, err := postControl(cmd.Context(), u, tok, req, c.timeout)
	if err != nil {
		return &exitError{1, err}
	}
	out := cmd.OutOrStdout()
	var rep debug.ControlReply
	if code == http.StatusInternalServerError && json.Unmarshal(body, &rep) == nil && rep.Detail != "" {
		// carried out in part (a reload that failed half-way): what was
		// done and what not, as for a success, then exit 1
		if err := c.print(out, body, rep); err != nil {
			return err
		}
		return &exitError{1, fmt.Errorf("%s: the %s was not carried out in full (see above, the tree's reload and drover events)", u, req.Action)}
	}
	if code != http.StatusOK {
		msg := treeOneLine(string(escapeJSON(body)), 500)
		// A request the node found wrong (a bad target, a broken config
		// for reload) exits 2, as a bad flag would.
		if code == http.StatusBadRequest {
			return &exitError{2, fmt.Errorf("%s refused the %s: %s", u, req.Action, msg)}
		}
		if code == http.StatusUnauthorized {
			return &exitError{1, fmt.Errorf("%s refused the token: controls need node.admin_token (or node.debug_token when the node has no admin token): pass --token or set %s", u, adminTokenEnv)}
		}
		return &exitError{1, fmt.Errorf("%s answered %d: %s", u, code, msg)}
	}
	if !c.asJSON {
		if err := json.Unmarshal(body, &rep); err != nil {
			return &exitError{1, fmt.Errorf("%s did not answer with a control reply: %w", u, err)}
		}
	}
	return c.print(out, body, rep)
}

// print writes a control's reply: its JSON (--json) or "node: detail".
func (c *controlFlags) print(out io.Writer, body []byte, rep debug.ControlReply) error {
	if c.asJSON {
		_, err := out.Write(escapeJSON(body))
		fmt.Fprintln(out)
		return err
	}
	fmt.Fprintf(terminalWriter{out}, "%s: %s\n", rep.Node, rep.Detail)
	return nil
}

// controlURL turns --addr into the URL of the action's control route,
// accepting what treeURL accepts.
func controlURL(addr, action string) (string, error) {
	t, err := treeURL(addr, false)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(t)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/debug/tree") + "/debug/control/" + url.PathEscape(action)
	u.RawQuery = ""
	return u.String(), nil
}

// postControl POSTs req as JSON and returns the reply's body and status.
func postControl(ctx context.Context, u, token string, req debug.ControlRequest, timeout time.Duration) ([]byte, int, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	return endpointDo(ctx, http.MethodPost, u, token, bytes.NewReader(b), timeout, 16<<20)
}

// newControl builds one control command: args turns the positional
// arguments into the request (nil: none taken).
func newControl(action, use, short, long string, nargs cobra.PositionalArgs, args func([]string, *debug.ControlRequest) error, extra func(*cobra.Command, *debug.ControlRequest)) *cobra.Command {
	var c controlFlags
	var req debug.ControlRequest
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args:                  nargs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, a []string) error {
			r := req
			r.Action = action
			if args != nil {
				if err := args(a, &r); err != nil {
					return &exitError{2, err}
				}
			}
			return c.run(cmd, r)
		},
	}
	timeout := 30 * time.Second
	if action == debug.ActionReload {
		// a reload may hand units over for minutes: wait as long as the
		// endpoint may take to answer a control
		timeout = debug.DefaultControlTimeout + 10*time.Second
	}
	c.register(cmd, timeout)
	if extra != nil {
		extra(cmd, &req)
	}
	return cmd
}

// target reads SOURCE or SOURCE/UNIT (a unit is named with its source:
// orders/3).
func target(a []string, r *debug.ControlRequest) error {
	t := strings.TrimSpace(a[0])
	if t == "" {
		return errors.New("give a source (orders) or a unit (orders/3)")
	}
	src, _, isUnit := strings.Cut(t, "/")
	r.Source = src
	if isUnit {
		r.Unit = t
	}
	return nil
}

func newControls() []*cobra.Command {
	return []*cobra.Command{
		newControl(debug.ActionPause, "pause SOURCE|SOURCE/UNIT [flags]", "pause a source or one unit, cluster-wide",
			`pause writes a standing pause to the store's controls table: the unit (or every
unit of the source) keeps its lease and fetches nothing, on whichever node
holds it, across moves and restarts, until resumed. The tree shows it
paused. The control is recorded in the audit table (drover events).`,
			cobra.ExactArgs(1), target, nil),
		newControl(debug.ActionResume, "resume SOURCE|SOURCE/UNIT [flags]", "resume a paused source or unit",
			`resume removes a pause; the unit continues from its checkpoint.`,
			cobra.ExactArgs(1), target, nil),
		newControl(debug.ActionSeek, "seek SOURCE/UNIT --to POSITION|earliest|latest|TIME | --after POSITION [flags]", "move a stream unit's checkpoint",
			`seek has the unit's owner write a new checkpoint under its lease: a position,
earliest, latest, an RFC 3339 time (the first message at or after it), or,
with --after, the position just past the one given (to skip a poison
message). Messages after the new checkpoint are applied (again). Any node
takes it: the seek is written to the unit's control row, and an owner
other than the node asked carries it out within a renewal round (see
last_seek in drover tree).`,
			cobra.ExactArgs(1), func(a []string, r *debug.ControlRequest) error {
				if err := target(a, r); err != nil {
					return err
				}
				if r.Unit == "" {
					return errors.New("seek takes one unit (orders/3), not a whole source")
				}
				if r.To == "" {
					return errors.New("seek needs --to or --after")
				}
				return nil
			}, func(cmd *cobra.Command, r *debug.ControlRequest) {
				cmd.Flags().StringVar(&r.To, "to", "", "the new position: a position, earliest, latest or an RFC 3339 time")
				cmd.Flags().Func("after", "skip to just past this position", func(v string) error {
					if v == "" {
						return errors.New("empty position")
					}
					r.To = "after:" + v
					return nil
				})
			}),
		newControl(debug.ActionDrain, "drain [flags]", "take the node at --addr out of placement",
			`drain makes the node leave placement: it hands every unit over as on SIGTERM
and stays up, serving its tree, until undrained or told to exit.`,
			cobra.NoArgs, nil, nil),
		newControl(debug.ActionUndrain, "undrain [flags]", "bring a drained node back into placement",
			`undrain makes a drained node take units again.`,
			cobra.NoArgs, nil, nil),
		newControl(debug.ActionExit, "exit [flags]", "have the node at --addr leave the cluster and exit",
			`exit makes the node do what SIGTERM does: hand every unit over, leave the
cluster and exit with status 0 (a drained node too).`,
			cobra.NoArgs, nil, nil),
		newControl(debug.ActionReload, "reload [flags]", "have the node at --addr re-read its config",
			`reload has the node re-read its config file (as SIGHUP does), validate it as
drover check does and apply the difference without a restart. An invalid
file changes nothing: the node says why and this command exits 2. A reload
that failed once it began (a source that could not start, a removed
source whose units had not handed over in the node's time) is not rolled
back: this command prints what was applied, what not and what still
stops, and exits 1. A source still stopping ends its removal by itself;
run reload again to wait for it (or to start a changed source's new
settings).`,
			cobra.NoArgs, nil, nil),
	}
}
