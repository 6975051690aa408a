package node_test

// Shared pieces of the end-to-end tests (e2e_*_test.go): one test per
// broker produces a seeded workload to a real server, runs a real node
// from a YAML config through config.Parse and node.Start, kills it
// (Close: no drain, no lease release) when about half is applied, starts a
// node with another name that must take the leases over, and then checks
// the store against what was produced:
//
//   - drover_audit (written by the "audit" handler inside the fenced
//     transaction) holds every produced message exactly once;
//   - per stream partition, the audit rows were written in increasing
//     position order, and the second node's fencing tokens are above the
//     first's;
//   - the records table equals decoding the produced messages in partition
//     order, last operation per key winning;
//   - the records source's dead letters are exactly the messages decoding
//     refuses, each with its reason, each written once.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to read drover_audit

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/syncbuf"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
	"github.com/drover-dev/drover/persistence/stores"
	"github.com/drover-dev/drover/testkit"
)

const (
	// e2eMessages is how many messages each test produces per data set.
	e2eMessages = 5000
	// e2eMaxBytes is the records sources' max_message_bytes and the
	// workload's MaxBytes: its oversize messages are a little bigger. The
	// audit sources keep the 1 MiB default, so the audit handler sees
	// every message, oversize ones included.
	e2eMaxBytes = 4096
	// e2eBatch is every source's batch_size: small, so that a run has
	// many batches and the kill lands in the middle.
	e2eBatch = 50
)

var (
	e2ePG      = pgtest.New()
	e2eSQS     = awstest.SQS()
	e2eKinesis = awstest.Kinesis()
)

func TestMain(m *testing.M) {
	code := awstest.Main(m, e2eSQS, e2eKinesis)
	if err := e2ePG.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// e2eSQLiteURL is a fresh SQLite store in the test's temporary directory.
func e2eSQLiteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "drover.db")
}

// e2eWorkload returns e2eMessages messages of testkit's seeded workload.
// A queue has no order, so its keys are all distinct (the final table
// then does not depend on the order of delivery); tombstones exist on
// Kafka only. It fails t unless every kind the test is about is there.
func e2eWorkload(t *testing.T, seed uint64, queue, tombstones bool) []brokers.Message {
	t.Helper()
	wl := testkit.NewWorkload(seed)
	wl.MaxBytes = e2eMaxBytes
	wl.Tombstones = tombstones
	if queue {
		wl.Keys = 1 << 30
	}
	msgs := wl.Batch(e2eMessages)
	kinds := map[string]int{}
	dc := decode.Config{KeyField: "id", MaxBytes: e2eMaxBytes}
	for _, m := range msgs {
		op := dc.Record(m)
		switch {
		case m.Tombstone:
			kinds["tombstone"]++
		case bytes.Contains(m.Value, []byte(`"_deleted":true`)):
			kinds["_deleted"]++
		case bytes.Contains(m.Value, []byte(`"op":"d"`)):
			kinds["debezium delete"]++
		case bytes.Contains(m.Value, []byte(`"op":`)):
			kinds["debezium upsert"]++
		case op.Kind == persistence.OpDeadLetter && strings.Contains(op.Reason, "exceeds max_message_bytes"):
			kinds["oversize"]++
		case op.Kind == persistence.OpDeadLetter && strings.HasPrefix(op.Reason, decode.PrefixNoKey):
			kinds["unkeyed"]++
		case op.Kind == persistence.OpDeadLetter:
			kinds["malformed"]++
		default:
			kinds["upsert"]++
		}
	}
	want := []string{"_deleted", "debezium delete", "debezium upsert", "oversize", "unkeyed", "malformed", "upsert"}
	if tombstones {
		want = append(want, "tombstone")
	} else if kinds["tombstone"] > 0 {
		t.Fatalf("workload: %d tombstones with tombstones off", kinds["tombstone"])
	}
	for _, k := range want {
		if kinds[k] == 0 {
			t.Fatalf("workload seed %d has no %s message: %v", seed, k, kinds)
		}
	}
	t.Logf("workload seed %d: %v", seed, kinds)
	return msgs
}

// e2eMsg is one produced message as a source reads it.
type e2eMsg struct {
	Part string          // partition, shard or subject of a stream; "" for a queue
	Msg  brokers.Message // with Position (and ID, for a queue) as the source sees it
}

// e2eSource is one configured source and what it must read.
type e2eSource struct {
	Name  string
	Audit bool   // mode: handler with the audit handler; else records mode into Table
	Queue bool   // a queue (dedupe by message id) rather than a stream
	Table string // records mode
	Slots int    // queues; 0: the default
	Sent  []e2eMsg
}

// e2eSortParts sorts each partition's messages by position (the order a
// reader returns them in).
func e2eSortParts(msgs []e2eMsg) {
	slices.SortStableFunc(msgs, func(a, b e2eMsg) int {
		if c := strings.Compare(a.Part, b.Part); c != 0 {
			return c
		}
		return brokers.ComparePositions(a.Msg.Position, b.Msg.Position)
	})
}

// YAML is the source's entry under sources:, with typ's section holding
// section (YAML lines without indentation).
func (s *e2eSource) YAML(typ, section string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    type: %s\n", s.Name, typ)
	if s.Audit {
		b.WriteString("    mode: handler\n    handler_name: audit\n")
	} else {
		fmt.Fprintf(&b, "    mode: records\n    records:\n      table: %s\n      key: id\n    max_message_bytes: %d\n", s.Table, e2eMaxBytes)
	}
	fmt.Fprintf(&b, "    batch_size: %d\n    max_wait: 200ms\n    lease_ttl: 10s\n", e2eBatch)
	if s.Slots > 0 {
		fmt.Fprintf(&b, "    slots: %d\n", s.Slots)
	}
	fmt.Fprintf(&b, "    %s:\n", typ)
	for _, l := range strings.Split(strings.TrimSpace(section), "\n") {
		b.WriteString("      " + l + "\n")
	}
	return b.String()
}

// e2eConfigYAML is a whole node config: the node's name, everything on
// free loopback ports, the store, and the sources' entries.
func e2eConfigYAML(name, storeURL, sources string) []byte {
	return []byte(fmt.Sprintf(`node:
  name: %s
  debug_addr: 127.0.0.1:0
cluster:
  bind: 127.0.0.1:0
store:
  url: %q
sources:
%s`, name, storeURL, sources))
}

// e2eRun describes one end-to-end run.
type e2eRun struct {
	StoreURL string
	Sources  []*e2eSource
	// SourcesYAML is the sources: list of the config (the entries of
	// Sources' YAML methods).
	SourcesYAML string
	// LogLevel of the node's logger (default Info).
	LogLevel slog.Level
	// Drained, for queues, reports whether the broker holds no message
	// that is not acked, waiting or in flight. The second node runs until
	// it holds: the store having every message id is not enough, since a
	// message the first node applied but did not ack comes back after its
	// ack deadline and must be acked then.
	Drained func(ctx context.Context) (bool, string)
	// KillWhen, when set, replaces the default kill trigger (about half of
	// the audit messages applied): node 1 is killed as soon as it holds,
	// polled against the store. After the kill it is asked once more, and
	// the run fails unless it still holds: the state it waited for is the
	// state node 2 takes over from.
	KillWhen func(ctx context.Context, st persistence.Store) (bool, string)
}

// e2eResult is what a run leaves for the broker's own checks.
type e2eResult struct {
	Configs     []*config.Config // of the first and the second node
	Logs        *syncbuf.Buffer  // both nodes' logs
	Trees       [][]byte         // Tree() JSON: the first node's just before the kill, the second's at the end
	DebugTree   []byte           // GET /debug/tree of the second node at the end
	DebugEvents []byte           // GET /debug/events of that node at the end
	Metrics     []byte           // GET /metrics of the second node at the end
}

// Names of the two nodes: the second is another member, so it must take
// over leases the first (no longer a member) still holds.
const (
	e2eNode1 = "e2e-node-1"
	e2eNode2 = "e2e-node-2"
)

// runE2E runs r: node 1 until about half of the audit sources' messages
// are applied (give a run one audit source: with several, one may be done
// before the kill while another has hardly begun), a kill, node 2 until everything is applied (and the broker
// drained), a graceful shutdown of node 2, the checks against the store,
// and Drained once more after the shutdown.
func runE2E(t *testing.T, r e2eRun) e2eResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := e2eResult{Logs: &syncbuf.Buffer{}}
	logger := slog.New(slog.NewTextHandler(res.Logs, &slog.HandlerOptions{Level: r.LogLevel}))
	t.Cleanup(func() {
		if t.Failed() {
			logs := res.Logs.String()
			if len(logs) > 16<<10 {
				logs = "…" + logs[len(logs)-16<<10:]
			}
			t.Logf("node logs (tail):\n%s", logs)
		}
	})
	start := func(name string) *node.Node {
		t.Helper()
		cfg, err := config.Parse(e2eConfigYAML(name, r.StoreURL, r.SourcesYAML), config.Options{})
		if err != nil {
			t.Fatalf("config of %s: %v", name, err)
		}
		res.Configs = append(res.Configs, cfg)
		n, err := node.Start(ctx, cfg, node.Options{
			Logger:   logger.With("test_node", name),
			Handlers: map[string]actors.Handler{"audit": node.AuditHandler},
		})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		return n
	}

	audits := map[string]int{}
	total := 0
	for _, s := range r.Sources {
		if s.Audit {
			audits[s.Name] = len(s.Sent)
			total += len(s.Sent)
		}
	}
	if total == 0 {
		t.Fatal("runE2E: no audit source")
	}

	began := time.Now()
	n1 := start(e2eNode1)
	n1Closed := false
	t.Cleanup(func() {
		if !n1Closed {
			n1.Close()
		}
	})
	st, err := stores.Open(ctx, r.StoreURL, stores.Options{})
	if err != nil {
		t.Fatalf("open the store to check it: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	db := openE2EDB(ctx, t, r.StoreURL)

	// Kill node 1 when its tree says about half is applied, or when
	// KillWhen holds.
	var applied int64
	err = e2eWaitFor(ctx, 5*time.Millisecond, 60*time.Second, func() (bool, string) {
		applied = e2eApplied(n1.Tree(), audits)
		if r.KillWhen != nil {
			return r.KillWhen(ctx, st)
		}
		return applied >= int64(total/2), fmt.Sprintf("%d of %d applied", applied, total)
	})
	if err != nil {
		t.Fatalf("node 1: waiting for the moment to kill it: %v", err)
	}
	tree1, err := json.Marshal(n1.Tree())
	if err != nil {
		t.Fatal(err)
	}
	res.Trees = append(res.Trees, tree1)
	n1.Close()
	n1Closed = true
	if r.KillWhen != nil {
		ok, why := r.KillWhen(ctx, st)
		if !ok {
			t.Fatalf("after the kill of %s, the state it was killed in is gone: %s", e2eNode1, why)
		}
		t.Logf("killed %s with: %s", e2eNode1, why)
	}
	counts, err := db.auditCounts(ctx)
	if err != nil {
		t.Fatalf("read drover_audit after the kill: %v", err)
	}
	atKill := 0
	for _, n := range counts {
		atKill += n
	}
	t.Logf("killed %s after %v: tree said %d applied, drover_audit has %d of %d %v", e2eNode1,
		time.Since(began).Round(time.Millisecond), applied, atKill, total, counts)
	if atKill == 0 || atKill >= total {
		t.Fatalf("drover_audit has %d of %d rows after the kill: the kill did not land in the middle of the run", atKill, total)
	}

	began = time.Now()
	n2 := start(e2eNode2)
	n2Done := false
	t.Cleanup(func() {
		if !n2Done {
			n2.Close()
		}
	})
	why := ""
	err = e2eWaitFor(ctx, 100*time.Millisecond, 60*time.Second, func() (bool, string) {
		ok, w, err := e2eDone(ctx, st, db, r.Sources)
		if err != nil {
			w = err.Error()
		}
		if ok && r.Drained != nil {
			ok, w = r.Drained(ctx)
		}
		why = w
		return ok, w
	})
	if err != nil {
		tree, _ := json.MarshalIndent(n2.Tree(), "", "  ")
		t.Fatalf("node 2: not everything applied: %v (%s)\ntree: %s", err, why, tree)
	}
	t.Logf("%s finished the rest in %v", e2eNode2, time.Since(began).Round(time.Millisecond))
	tree2, err := json.Marshal(n2.Tree())
	if err != nil {
		t.Fatal(err)
	}
	res.Trees = append(res.Trees, tree2)
	res.DebugTree = e2eGet(ctx, t, "http://"+n2.DebugAddr()+"/debug/tree")
	res.DebugEvents = e2eGet(ctx, t, "http://"+n2.DebugAddr()+"/debug/events")
	res.Metrics = e2eGet(ctx, t, "http://"+n2.DebugAddr()+"/metrics")

	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	n2Done = true
	if err := n2.Shutdown(sctx); err != nil {
		t.Errorf("graceful shutdown of %s: %v", e2eNode2, err)
	}

	e2eVerify(ctx, t, st, db, r.Sources)
	if r.Drained != nil {
		if ok, why := r.Drained(ctx); !ok {
			t.Errorf("after the shutdown, the broker is not drained: %s", why)
		}
	}
	return res
}

// e2eApplied sums the applied counters of the units of the given sources.
func e2eApplied(tr actors.Tree, sources map[string]int) int64 {
	var n int64
	for _, s := range tr.Sources {
		if _, ok := sources[s.Name]; !ok {
			continue
		}
		for _, u := range s.Units {
			n += u.Applied
		}
	}
	return n
}

// e2eWaitFor polls cond every tick until it holds, ctx ends or limit
// passes.
func e2eWaitFor(ctx context.Context, tick, limit time.Duration, cond func() (bool, string)) error {
	return node.WaitCond(ctx, tick, limit, cond)
}

// e2eDone reports whether every source has applied everything: a stream
// source's checkpoint is at the last position of each partition, a queue
// source's dedupe table holds every message id.
func e2eDone(ctx context.Context, st persistence.Store, db *e2eDB, srcs []*e2eSource) (bool, string, error) {
	for _, s := range srcs {
		if s.Queue {
			n, err := db.dedupeCount(ctx, s.Name)
			if err != nil {
				return false, "", err
			}
			if n < len(s.Sent) {
				return false, fmt.Sprintf("%s: %d of %d message ids applied", s.Name, n, len(s.Sent)), nil
			}
			continue
		}
		cps, err := st.Checkpoints(ctx, s.Name)
		if err != nil {
			return false, "", err
		}
		at := map[string]string{}
		for _, cp := range cps {
			at[cp.Unit] = cp.Position
		}
		for part, last := range e2eLast(s.Sent) {
			unit := s.Name + "/" + part
			if at[unit] != last {
				return false, fmt.Sprintf("%s at %q, last produced %s", unit, at[unit], last), nil
			}
		}
	}
	return true, "", nil
}

// e2eLast is the last position of each partition.
func e2eLast(msgs []e2eMsg) map[string]string {
	last := map[string]string{}
	for _, m := range msgs {
		if brokers.ComparePositions(m.Msg.Position, last[m.Part]) > 0 {
			last[m.Part] = m.Msg.Position
		}
	}
	return last
}

func e2eGet(ctx context.Context, t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

// e2eVerify checks the store against what was produced.
func e2eVerify(ctx context.Context, t *testing.T, st persistence.Store, db *e2eDB, srcs []*e2eSource) {
	t.Helper()
	rows, err := db.audit(ctx)
	if err != nil {
		t.Fatalf("read drover_audit: %v", err)
	}
	for _, s := range srcs {
		if s.Audit {
			e2eCheckAudit(t, s, rows)
		} else {
			e2eCheckRecords(ctx, t, st, s)
		}
	}
	known := map[string]bool{}
	for _, s := range srcs {
		known[s.Name] = s.Audit
	}
	for _, r := range rows {
		if !known[r.Source] {
			t.Errorf("drover_audit has a row of source %q, which is not an audit source", r.Source)
			break
		}
	}
}

// e2eMsgKey identifies a produced message of s in the store: the unit and
// position for a stream, the message id (= position) for a queue, whose
// unit is whichever slot received it.
func e2eMsgKey(s *e2eSource, m e2eMsg) string {
	if s.Queue {
		return m.Msg.Position
	}
	return s.Name + "/" + m.Part + "@" + m.Msg.Position
}

func e2eStoreKey(s *e2eSource, unit, position string) string {
	if s.Queue {
		return position
	}
	return unit + "@" + position
}

// e2eCheckAudit checks the audit source s: every message exactly once,
// by both nodes, node 2 with higher fencing tokens, stream partitions in
// order.
func e2eCheckAudit(t *testing.T, s *e2eSource, all []auditRow) {
	t.Helper()
	var rows []auditRow
	for _, r := range all {
		if r.Source == s.Name {
			rows = append(rows, r)
		}
	}
	want := make(map[string]bool, len(s.Sent))
	for _, m := range s.Sent {
		want[e2eMsgKey(s, m)] = true
	}
	seen := map[string]int{}
	byNode := map[string]int{}
	for _, r := range rows {
		seen[e2eStoreKey(s, r.Unit, r.Position)]++
		byNode[r.Node]++
	}
	var lost, dup, extra []string
	for k := range want {
		switch n := seen[k]; {
		case n == 0:
			lost = append(lost, k)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	for k := range seen {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for _, p := range []struct {
		what string
		keys []string
	}{{"lost (never applied)", lost}, {"applied more than once", dup}, {"applied but never produced", extra}} {
		if len(p.keys) > 0 {
			sort.Strings(p.keys)
			t.Errorf("%s: %d messages %s, e.g. %v", s.Name, len(p.keys), p.what, p.keys[:min(len(p.keys), 5)])
		}
	}
	if byNode[e2eNode1] == 0 || byNode[e2eNode2] == 0 || len(byNode) != 2 {
		t.Errorf("%s: rows by node %v: want rows of %s and %s only", s.Name, byNode, e2eNode1, e2eNode2)
	}

	byUnit := map[string][]auditRow{}
	for _, r := range rows {
		byUnit[r.Unit] = append(byUnit[r.Unit], r)
	}
	for unit, rs := range byUnit {
		// The lease changed hands: node 2's tokens are all above node 1's.
		var max1, min2 int64 = -1, -1
		for _, r := range rs {
			switch r.Node {
			case e2eNode1:
				max1 = max(max1, r.Token)
			case e2eNode2:
				if min2 < 0 || r.Token < min2 {
					min2 = r.Token
				}
			}
		}
		if max1 >= 0 && min2 >= 0 && min2 <= max1 {
			t.Errorf("%s: %s applied with token %d, not above %s's %d", unit, e2eNode2, min2, e2eNode1, max1)
		}
		if s.Queue {
			continue
		}
		// Order: rows sorted by (token, write order) have increasing
		// positions. Within one Postgres transaction the write order is not
		// known (Ord is the transaction id), so a batch must only lie
		// wholly after the previous one.
		slices.SortStableFunc(rs, func(a, b auditRow) int {
			if c := cmp.Compare(a.Token, b.Token); c != 0 {
				return c
			}
			return cmp.Compare(a.Ord, b.Ord)
		})
		prevMax, groupMax := "", ""
		for i, r := range rs {
			if i > 0 && (r.Token != rs[i-1].Token || r.Ord != rs[i-1].Ord) {
				prevMax = groupMax
			}
			if brokers.ComparePositions(r.Position, prevMax) <= 0 {
				t.Errorf("%s: position %s (node %s, token %d) applied after %s: order not kept", unit, r.Position, r.Node, r.Token, prevMax)
				break
			}
			if brokers.ComparePositions(r.Position, groupMax) > 0 {
				groupMax = r.Position
			}
		}
	}
}

// e2eExpect decodes s's messages in partition order: the final table
// (key → document) and the dead letters (store key → reason).
func e2eExpect(t *testing.T, s *e2eSource) (table, dead map[string]string) {
	t.Helper()
	return e2eExpectWith(t, s, decode.Config{KeyField: "id", MaxBytes: e2eMaxBytes})
}

// e2eExpectWith is e2eExpect with the decode configuration dc.
func e2eExpectWith(t *testing.T, s *e2eSource, dc decode.Config) (table, dead map[string]string) {
	t.Helper()
	msgs := slices.Clone(s.Sent)
	e2eSortParts(msgs)
	sent := make([]testkit.Sent, len(msgs))
	for i, m := range msgs {
		// a queue keeps no order: each message is a partition of its own
		part := m.Part
		if s.Queue {
			part = m.Msg.Position
		}
		sent[i] = testkit.Sent{Partition: part, Msg: m.Msg}
	}
	e, err := testkit.Expect(dc, sent)
	if err != nil {
		t.Fatalf("%s: %v (pick another seed)", s.Name, err)
	}
	dead = make(map[string]string, len(e.Dead))
	for i, reason := range e.Dead {
		dead[e2eMsgKey(s, msgs[i])] = reason
	}
	return e.Docs, dead
}

// e2eCheckRecords compares a records source's table and dead letters
// with what decoding the produced messages gives.
func e2eCheckRecords(ctx context.Context, t *testing.T, st persistence.Store, s *e2eSource) {
	t.Helper()
	e2eCheckRecordsWith(ctx, t, st, s, decode.Config{KeyField: "id", MaxBytes: e2eMaxBytes})
}

// e2eCheckRecordsWith is e2eCheckRecords with the decode configuration dc.
func e2eCheckRecordsWith(ctx context.Context, t *testing.T, st persistence.Store, s *e2eSource, dc decode.Config) {
	t.Helper()
	want, wantDead := e2eExpectWith(t, s, dc)
	got := map[string]string{}
	for after := ""; ; {
		rs, err := st.Records(ctx, s.Table, after, 1000)
		if err != nil {
			t.Fatalf("%s: read table %s: %v", s.Name, s.Table, err)
		}
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			got[r.Key] = string(r.Doc)
		}
		after = rs[len(rs)-1].Key
	}
	var bad []string
	for k, doc := range want {
		g, ok := got[k]
		if !ok {
			bad = append(bad, fmt.Sprintf("key %s missing, want %s", k, doc))
			continue
		}
		if same, err := persistence.JSONEqual([]byte(g), []byte(doc)); err != nil || !same {
			bad = append(bad, fmt.Sprintf("key %s is %s, want %s (%v)", k, g, doc, err))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("key %s should not be there (deleted or never written)", k))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s: table %s has %d rows, want %d; %d differences, e.g.:\n%s", s.Name, s.Table, len(got), len(want),
			len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}

	dls, err := st.DeadLetters(ctx, persistence.DeadLetterFilter{Source: s.Name})
	if err != nil {
		t.Fatalf("%s: dead letters: %v", s.Name, err)
	}
	bad = bad[:0]
	for _, dl := range dls {
		k := e2eStoreKey(s, dl.Unit, dl.Position)
		reason, ok := wantDead[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s dead-lettered (%s) but decodes fine", k, dl.Reason))
		case dl.Reason != reason:
			bad = append(bad, fmt.Sprintf("%s dead-lettered with reason %q, want %q", k, dl.Reason, reason))
		case dl.Attempts != 1:
			bad = append(bad, fmt.Sprintf("%s dead-lettered %d times, want once", k, dl.Attempts))
		}
		delete(wantDead, k)
	}
	for k, reason := range wantDead {
		bad = append(bad, fmt.Sprintf("%s not dead-lettered, want reason %q", k, reason))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s: %d dead letters, %d differences, e.g.:\n%s", s.Name, len(dls), len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	t.Logf("%s: table %s has %d rows, %d dead letters, as expected when no difference is reported", s.Name, s.Table, len(got), len(dls))
}

// e2eDB reads the store's tables with SQL (stores.Query).
type e2eDB struct{ url string }

func openE2EDB(_ context.Context, _ *testing.T, storeURL string) *e2eDB { return &e2eDB{url: storeURL} }

func (d *e2eDB) each(ctx context.Context, q string, args []any, row func(scan func(...any) error) error) error {
	return stores.Query(ctx, d.url, q, args, row)
}

// auditRow is one row of drover_audit. Ord is the write order: SQLite's
// rowid, or PostgreSQL's transaction id (xmin), the same for every row of
// one batch.
type auditRow struct {
	Source, Unit, Position, Node string
	Token, Ord                   int64
}

func (d *e2eDB) audit(ctx context.Context) ([]auditRow, error) {
	ord := "rowid"
	if t, _ := stores.Parse(d.url); t.Kind == stores.Postgres {
		ord = "xmin::text::bigint"
	}
	var out []auditRow
	err := d.each(ctx, "SELECT source, unit, position, node, token, "+ord+" FROM "+node.AuditTable, nil, func(scan func(...any) error) error {
		var r auditRow
		if err := scan(&r.Source, &r.Unit, &r.Position, &r.Node, &r.Token, &r.Ord); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// auditCounts is the number of drover_audit rows per source.
func (d *e2eDB) auditCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := d.each(ctx, "SELECT source, count(*) FROM "+node.AuditTable+" GROUP BY source", nil, func(scan func(...any) error) error {
		var s string
		var n int64
		if err := scan(&s, &n); err != nil {
			return err
		}
		out[s] = int(n)
		return nil
	})
	return out, err
}

// dedupeCount is how many message ids of a queue source were applied.
func (d *e2eDB) dedupeCount(ctx context.Context, source string) (int, error) {
	var n int64
	err := d.each(ctx, "SELECT count(*) FROM drover_dedupe WHERE source = $1", []any{source}, func(scan func(...any) error) error {
		return scan(&n)
	})
	return int(n), err
}

// e2eNoSecret fails t when secret shows in the logs, a tree, the debug
// endpoint, the metrics or the configs' printed form.
func e2eNoSecret(t *testing.T, res e2eResult, secret string) {
	t.Helper()
	if secret == "" {
		t.Fatal("e2eNoSecret: empty secret")
	}
	where := map[string]string{"logs": res.Logs.String(), "debug tree": string(res.DebugTree), "debug events": string(res.DebugEvents), "metrics": string(res.Metrics)}
	for i, tr := range res.Trees {
		where[fmt.Sprintf("tree of node %d", i+1)] = string(tr)
	}
	for i, c := range res.Configs {
		where[fmt.Sprintf("config of node %d", i+1)] = c.String()
	}
	for what, text := range where {
		if text == "" {
			t.Errorf("%s is empty: nothing was checked", what)
		}
		if strings.Contains(text, secret) {
			t.Errorf("the secret appears in the %s", what)
		}
	}
}
