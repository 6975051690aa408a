package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/internal/workload"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// Verdict is the demo's result line.
type Verdict struct {
	Produced     int
	Applied      int
	DeadLettered int
	Lost         int
	Duplicated   int
	Moved        int
	// Failover is the longest a killed node's unit waited to run
	// elsewhere (with chaos: to run again, on any node).
	Failover time.Duration
	// Chaos: the run was `drover demo --chaos`; the counts are its
	// actions during the chaos window.
	Chaos                        bool
	Kills, Terms, Restarts, Cuts int
	// Problems explains lost and duplicated messages (a few examples).
	Problems []string
}

// Line is the last line `drover demo --verify` prints; with chaos it ends
// with the counts of its actions.
func (v Verdict) Line() string {
	l := fmt.Sprintf("verified: produced=%d applied=%d dead_lettered=%d lost=%d duplicated=%d moved=%d failover=%.2f",
		v.Produced, v.Applied, v.DeadLettered, v.Lost, v.Duplicated, v.Moved, v.Failover.Seconds())
	if v.Chaos {
		l += fmt.Sprintf(" kills=%d terms=%d restarts=%d cuts=%d", v.Kills, v.Terms, v.Restarts, v.Cuts)
	}
	return l
}

// OK reports nothing lost and nothing doubled.
func (v Verdict) OK() bool { return v.Lost == 0 && v.Duplicated == 0 }

// Drained reports whether the Kafka sources' checkpoints (orders, the
// audit sources, orders_avro) reached the last produced offset of every
// partition, and every queue message was applied
// by both of its sources.
func (c *Cluster) Drained(ctx context.Context, prod Produced) (bool, string, error) {
	sent := prod.Kafka
	s, err := stores.Open(ctx, c.cfg.StoreURL, stores.Options{})
	if err != nil {
		return false, "", err
	}
	defer s.Close()
	last := lastOffsets(sent, func(r Sent) int64 { return r.Offset })
	for _, src := range append([]string{"orders"}, c.auditSources()...) {
		if why, err := checkpointsAt(ctx, s, src, last); why != "" || err != nil {
			return false, why, err
		}
	}
	if why, err := checkpointsAt(ctx, s, AvroTopic, lastOffsets(prod.Avro, func(r AvroSent) int64 { return r.Offset })); why != "" || err != nil {
		return false, why, err
	}
	for src, msgs := range prod.Queues {
		// every message is in the dedupe table of the records source and
		// in the audit of the audit source
		var deduped, audited int
		if err := stores.Query(ctx, c.cfg.StoreURL, `SELECT count(*) FROM drover_dedupe WHERE source = $1`, []any{src}, func(scan func(...any) error) error {
			return scan(&deduped)
		}); err != nil {
			return false, err.Error(), nil
		}
		if err := stores.Query(ctx, c.cfg.StoreURL, `SELECT count(DISTINCT position) FROM drover_audit WHERE source = $1`, []any{src + "_audit"}, func(scan func(...any) error) error {
			return scan(&audited)
		}); err != nil {
			return false, err.Error(), nil // no audit table yet
		}
		if deduped < len(msgs) || audited < len(msgs) {
			return false, fmt.Sprintf("%s: %d of %d applied, %d audited", src, deduped, len(msgs), audited), nil
		}
	}
	return true, "", nil
}

// checkpointsAt says why src's checkpoints have not reached last (partition
// -> last produced offset): "" when every one has.
func checkpointsAt(ctx context.Context, s persistence.Checkpoints, src string, last map[int32]int64) (string, error) {
	cps, err := s.Checkpoints(ctx, src)
	if err != nil {
		return "", err
	}
	at := map[string]string{}
	for _, cp := range cps {
		at[cp.Unit] = cp.Position
	}
	for _, p := range slices.Sorted(maps.Keys(last)) {
		unit := fmt.Sprintf("%s/%d", src, p)
		if want := strconv.FormatInt(last[p], 10); at[unit] != want {
			return fmt.Sprintf("%s at %q, last produced %s", unit, at[unit], want), nil
		}
	}
	return "", nil
}

// WaitDrained polls Drained until true or ctx ends.
func (c *Cluster) WaitDrained(ctx context.Context, prod Produced) error {
	why := ""
	for {
		ok, w, err := c.Drained(ctx, prod)
		if ok {
			return nil
		}
		switch {
		case err != nil && ctx.Err() != nil && why != "":
			// the deadline cut the last query short: keep why it was not
			// drained before
		case err != nil:
			why = err.Error()
		default:
			why = w
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: not drained: %s", why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Verify compares the store with what was produced:
//   - the audit table (the "audit" source, handler mode) must hold every
//     produced position exactly once: a missing one is lost, a second row
//     duplicated;
//   - the orders table (records mode) must equal what decoding the
//     produced messages in partition order and keeping the last operation
//     per key gives, and the dead letters must be exactly the messages
//     decoding refuses; a difference counts as lost;
//   - the same for the queues: jobs (NATS) and events (Pub/Sub), whose audit
//     sources are jobs_audit and events_audit;
//   - the orders_avro table (Avro through the schema registry) must equal
//     the last document produced per key, tombstoned keys absent, with no
//     dead letters;
//   - a source AddAuditSource added holds every produced Kafka record
//     exactly once, as "audit" does.
func (c *Cluster) Verify(ctx context.Context, prod Produced) (Verdict, error) {
	var v Verdict
	sent := prod.Kafka
	counts, err := c.auditCounts(ctx, "audit")
	if err != nil {
		return v, err
	}
	s, err := stores.Open(ctx, c.cfg.StoreURL, stores.Options{})
	if err != nil {
		return v, err
	}
	defer s.Close()

	var kafka []checked
	parts := make([]int, 0, len(sent))
	for p := range sent {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	for _, p := range parts {
		for _, r := range sent[int32(p)] {
			m := r.Msg
			m.Position = strconv.FormatInt(r.Offset, 10)
			kafka = append(kafka, checked{audit: fmt.Sprintf("audit/%d@%s", p, m.Position),
				dead: fmt.Sprintf("orders/%d@%s", p, m.Position), sent: workload.Sent{Partition: strconv.Itoa(p), Msg: m}})
		}
	}
	if err := v.check(ctx, s, "orders", counts, kafka, func(dl persistence.DeadLetter) string { return dl.Unit + "@" + dl.Position }); err != nil {
		return v, err
	}
	for _, src := range c.Added() {
		if err := c.verifyAdded(ctx, &v, src, kafka); err != nil {
			return v, err
		}
	}
	if err := v.verifyAvro(ctx, s, prod.Avro); err != nil {
		return v, err
	}
	for _, src := range slices.Sorted(maps.Keys(prod.Queues)) {
		if err := c.verifyQueue(ctx, s, &v, src, prod.Queues[src]); err != nil {
			return v, err
		}
	}
	v.Applied = v.Produced - v.DeadLettered
	return v, nil
}

// contents is the part of a store the verdict reads back: records, dead
// letters and checkpoints.
type contents interface {
	persistence.Records
	persistence.DeadLetters
	persistence.Checkpoints
}

// verifyQueue checks one queue (jobs, events) and its audit source.
func (c *Cluster) verifyQueue(ctx context.Context, s contents, v *Verdict, src string, msgs []QueueSent) error {
	counts := map[string]int{}
	if err := stores.Query(ctx, c.cfg.StoreURL, `SELECT position, count(*) FROM drover_audit WHERE source = $1 GROUP BY position`, []any{src + "_audit"},
		func(scan func(...any) error) error {
			var pos string
			var n int
			if err := scan(&pos, &n); err != nil {
				return err
			}
			counts[pos] = n
			return nil
		}); err != nil {
		return err
	}
	items := make([]checked, len(msgs))
	for i, m := range msgs {
		msg := m.Msg
		msg.Position, msg.ID = m.ID, m.ID
		// a queue keeps no order: each message is a partition of its own
		items[i] = checked{audit: m.ID, dead: m.ID, sent: workload.Sent{Partition: m.ID, Msg: msg}}
	}
	return v.check(ctx, s, src, counts, items, func(dl persistence.DeadLetter) string { return dl.Position })
}

// checked is one produced message as the verifier looks for it: the key of
// its audit row, the key of its dead letter, and the message.
type checked struct {
	audit, dead string
	sent        workload.Sent
}

// check verifies one broker's messages: each is in the audit exactly once
// (counts: audit key -> rows), and the records source's table and dead
// letters are what workload.Expect works out from them.
func (v *Verdict) check(ctx context.Context, s contents, records string, counts map[string]int, msgs []checked, deadKey func(persistence.DeadLetter) string) error {
	sents := make([]workload.Sent, len(msgs))
	for i, m := range msgs {
		v.Produced++
		switch n := counts[m.audit]; {
		case n == 0:
			v.Lost++
			v.problem("lost: %s %s never applied", records, m.audit)
		case n > 1:
			v.Duplicated += n - 1
			v.problem("duplicated: %s %s applied %d times", records, m.audit, n)
		}
		delete(counts, m.audit)
		sents[i] = m.sent
	}
	for k, n := range counts {
		v.Duplicated += n
		v.problem("duplicated: %s %s applied but never produced", records, k)
	}
	exp, err := workload.Expect(decode.Config{KeyField: "id", MaxBytes: MaxMessageBytes}, sents)
	if err != nil {
		return fmt.Errorf("demo: %s: %w", records, err)
	}
	wantDead := make(map[string]string, len(exp.Dead))
	for i, reason := range exp.Dead {
		wantDead[msgs[i].dead] = reason
	}
	return v.compare(ctx, s, records, exp.Docs, wantDead, deadKey)
}

// compare checks a records table and the dead letters of its source.
func (v *Verdict) compare(ctx context.Context, s contents, source string, want, wantDead map[string]string, deadKey func(persistence.DeadLetter) string) error {
	got := map[string]string{}
	for after := ""; ; {
		rs, err := s.Records(ctx, source, after, 5000)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			got[r.Key] = string(r.Doc)
		}
		after = rs[len(rs)-1].Key
	}
	for k, doc := range want {
		if same, _ := persistence.JSONEqual([]byte(got[k]), []byte(doc)); got[k] == "" || !same {
			v.Lost++
			v.problem("lost: %s key %s is %q, want %q", source, k, clip(got[k]), clip(doc))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			v.Lost++
			v.problem("lost: %s key %s should be deleted", source, k)
		}
	}
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{Source: source})
	if err != nil {
		return err
	}
	for _, dl := range dls {
		k := deadKey(dl)
		if _, ok := wantDead[k]; !ok {
			v.Lost++
			v.problem("lost: %s %s dead-lettered (%s) but decodes fine", source, k, dl.Reason)
		}
		delete(wantDead, k)
	}
	for k, reason := range wantDead {
		v.Lost++
		v.problem("lost: %s %s should be dead-lettered (%s)", source, k, reason)
	}
	v.DeadLettered += len(dls)
	return nil
}

func (v *Verdict) problem(f string, a ...any) {
	if len(v.Problems) < 10 {
		v.Problems = append(v.Problems, fmt.Sprintf(f, a...))
	}
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// verifyAdded checks a source AddAuditSource added: it read the topic
// from the start, so every produced record is in its audit exactly once.
// Its messages are the Kafka ones, counted as produced once already.
func (c *Cluster) verifyAdded(ctx context.Context, v *Verdict, src string, kafka []checked) error {
	counts, err := c.auditCounts(ctx, src)
	if err != nil {
		return err
	}
	for _, m := range kafka {
		// the audit key "audit/<p>@<offset>" under this source's name
		key := src + strings.TrimPrefix(m.audit, "audit")
		switch n := counts[key]; {
		case n == 0:
			v.Lost++
			v.problem("lost: %s %s never applied", src, key)
		case n > 1:
			v.Duplicated += n - 1
			v.problem("duplicated: %s %s applied %d times", src, key, n)
		}
		delete(counts, key)
	}
	for k, n := range counts {
		v.Duplicated += n
		v.problem("duplicated: %s %s applied but never produced", src, k)
	}
	return nil
}

// auditCounts reads a Kafka audit source's rows: "unit@position" -> rows.
func (c *Cluster) auditCounts(ctx context.Context, source string) (map[string]int, error) {
	out := map[string]int{}
	err := stores.Query(ctx, c.cfg.StoreURL, `SELECT unit, position, count(*) FROM drover_audit WHERE source = $1 GROUP BY unit, position`, []any{source},
		func(scan func(...any) error) error {
			var unit, pos string
			var n int
			if err := scan(&unit, &pos, &n); err != nil {
				return err
			}
			out[unit+"@"+pos] = n
			return nil
		})
	return out, err
}
