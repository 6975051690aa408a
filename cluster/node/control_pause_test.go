package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// postJSON posts body to the node's control route of action with token.
func postJSON(t *testing.T, n *Node, action, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+n.DebugAddr()+"/debug/control/"+action, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func unitOf(tr actors.Tree, unit string) (actors.UnitStatus, bool) {
	for _, s := range tr.Sources {
		for _, u := range s.Units {
			if u.Unit == unit {
				return u, true
			}
		}
	}
	return actors.UnitStatus{}, false
}

func produce(t *testing.T, st *memory.Stream, part string, from, n int) string {
	t.Helper()
	msgs := make([]brokers.Message, n)
	for i := range msgs {
		msgs[i] = brokers.Message{Value: fmt.Appendf(nil, `{"id":"%s-%d"}`, part, from+i)}
	}
	pos, err := st.Produce(part, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return pos[len(pos)-1]
}

// waitCheckpoint waits until unit's checkpoint is pos.
func waitCheckpoint(t *testing.T, s persistence.Store, unit, pos string) {
	t.Helper()
	err := WaitCond(t.Context(), 10*time.Millisecond, 15*time.Second, func() (bool, string) {
		cp, err := s.Checkpoint(t.Context(), unit)
		return err == nil && cp.Position == pos, fmt.Sprintf("checkpoint of %s: %q %v, want %s", unit, cp.Position, err, pos)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Pause and resume through POST /debug/control/{action} on a real node
// with a SQLite store: the admin token is required, a bad target is
// refused naming it, the paused unit shows paused and applies nothing
// while the other goes on, the audit table records who and why, and the
// resumed unit applies what came meanwhile.
func TestPauseOverHTTP(t *testing.T) {
	env := map[string]string{"TOK": "read-tok", "ADM": "admin-tok"}
	n := startNode(t, memoryNodeYAML(`debug_addr: "127.0.0.1:0", debug_token: "${env:TOK}", admin_token: "${env:ADM}"`,
		`bind: "127.0.0.1:0", profile: fast`, t.TempDir(), 2),
		config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	defer n.Close()
	st := n.sources["m"].Stream.(*memory.Stream)
	waitCheckpoint(t, n.store, "m/0", produce(t, st, "0", 0, 10))
	waitCheckpoint(t, n.store, "m/1", produce(t, st, "1", 0, 10))

	for _, c := range []struct {
		token, body string
		code        int
		says        string
	}{
		{"read-tok", `{"source":"m","unit":"m/0"}`, http.StatusUnauthorized, "admin token"},
		{"admin-tok", `{"source":"nope"}`, http.StatusBadRequest, `no source "nope"`},
		{"admin-tok", `{"source":"m","unit":"m/7"}`, http.StatusBadRequest, "no unit m/7"},
		{"admin-tok", `{"source":"m","unit":"other/0"}`, http.StatusBadRequest, `unit "other/0" is not a unit of source m`},
		{"admin-tok", `{}`, http.StatusBadRequest, "needs a source"},
	} {
		code, body := postJSON(t, n, "pause", c.token, c.body)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("pause %s with %s: %d %q, want %d saying %q", c.body, c.token, code, body, c.code, c.says)
		}
	}
	if cs, _ := n.store.ListControls(t.Context()); len(cs) != 0 {
		t.Fatalf("refused controls wrote rows: %+v", cs)
	}

	code, body := postJSON(t, n, "pause", "admin-tok", `{"source":"m","unit":"0","by":"alice","reason":"poison at 10"}`)
	if code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	var rep struct {
		debug.ControlReply
		Result ControlRow `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if r := rep.Result; rep.Node != "n1" || r.Unit != "m/0" || !r.Paused || r.By != "alice" || !strings.Contains(rep.Detail, "paused m/0") {
		t.Fatalf("pause reply %s", body)
	}
	// the node that took it applies it at once: no renewal round needed,
	// but the unit first applies what it may have in hand
	if err := WaitCond(t.Context(), 5*time.Millisecond, 5*time.Second, func() (bool, string) {
		u, _ := unitOf(n.Tree(), "m/0")
		return u.State == actors.StatePaused && u.LeaseToken > 0, "m/0 is " + u.State
	}); err != nil {
		t.Fatal(err)
	}
	cp0, err := n.store.Checkpoint(t.Context(), "m/0")
	if err != nil {
		t.Fatal(err)
	}
	last0 := produce(t, st, "0", 10, 5)
	waitCheckpoint(t, n.store, "m/1", produce(t, st, "1", 10, 5))
	// past a few renewal rounds: still paused, lease renewed, nothing applied
	u0, _ := unitOf(n.Tree(), "m/0")
	if err := WaitCond(t.Context(), 20*time.Millisecond, 15*time.Second, func() (bool, string) {
		u, _ := unitOf(n.Tree(), "m/0")
		return u.LeaseExpiresAt != nil && u0.LeaseExpiresAt != nil && u.LeaseExpiresAt.After(*u0.LeaseExpiresAt), "lease not renewed"
	}); err != nil {
		t.Fatal(err)
	}
	if cp, _ := n.store.Checkpoint(t.Context(), "m/0"); cp.Position != cp0.Position {
		t.Fatalf("paused m/0 applied: checkpoint %s, was %s", cp.Position, cp0.Position)
	}
	if u, _ := unitOf(n.Tree(), "m/0"); u.State != actors.StatePaused {
		t.Fatalf("m/0 is %s, want paused", u.State)
	}
	as, err := n.store.ListAudit(t.Context(), persistence.AuditFilter{Unit: "m/0"})
	if err != nil || len(as) != 1 || as[0].Node != "n1" || as[0].By != "alice" || as[0].Reason != "poison at 10" || as[0].Action != "pause" {
		t.Fatalf("audit of m/0: %+v, %v", as, err)
	}

	if code, body := postJSON(t, n, "resume", "admin-tok", `{"source":"m","unit":"m/0","by":"alice"}`); code != http.StatusOK || !strings.Contains(body, "resumed m/0") {
		t.Fatalf("resume: %d %s", code, body)
	}
	waitCheckpoint(t, n.store, "m/0", last0)
	if u, _ := unitOf(n.Tree(), "m/0"); u.State == actors.StatePaused {
		t.Fatal("m/0 still paused after its resume")
	}
	if rs, err := n.store.Records(context.Background(), "m", "", 100); err != nil || len(rs) != 30 {
		t.Fatalf("records: %d, %v; want 30 (every message once)", len(rs), err)
	}
}

// WaitCond polls cond every tick until it holds or limit passes (the
// end-to-end tests of package node_test use it too).
func WaitCond(ctx context.Context, tick, limit time.Duration, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %v: %s", ctx.Err(), limit, why)
		case <-tk.C:
		}
	}
}
