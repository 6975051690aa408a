package demo

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to read the audit table

	"github.com/drover-dev/drover/actors/decode"
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
	Failover     time.Duration
	// Problems explains lost and duplicated messages (a few examples).
	Problems []string
}

// Line is the last line `drover demo --verify` prints.
func (v Verdict) Line() string {
	return fmt.Sprintf("verified: produced=%d applied=%d dead_lettered=%d lost=%d duplicated=%d moved=%d failover=%.2f",
		v.Produced, v.Applied, v.DeadLettered, v.Lost, v.Duplicated, v.Moved, v.Failover.Seconds())
}

// OK reports nothing lost and nothing doubled.
func (v Verdict) OK() bool { return v.Lost == 0 && v.Duplicated == 0 }

// Drained reports whether both sources' checkpoints reached the last
// produced offset of every partition.
func (c *Cluster) Drained(ctx context.Context, sent map[int32][]Sent) (bool, string, error) {
	s, err := stores.Open(ctx, c.cfg.StoreURL, stores.Options{})
	if err != nil {
		return false, "", err
	}
	defer s.Close()
	for _, src := range []string{"orders", "audit"} {
		cps, err := s.Checkpoints(ctx, src)
		if err != nil {
			return false, "", err
		}
		at := map[string]string{}
		for _, cp := range cps {
			at[cp.Unit] = cp.Position
		}
		for p, recs := range sent {
			if len(recs) == 0 {
				continue
			}
			unit := fmt.Sprintf("%s/%d", src, p)
			last := strconv.FormatInt(recs[len(recs)-1].Offset, 10)
			if at[unit] != last {
				return false, fmt.Sprintf("%s at %q, last produced %s", unit, at[unit], last), nil
			}
		}
	}
	return true, "", nil
}

// WaitDrained polls Drained until true or ctx ends.
func (c *Cluster) WaitDrained(ctx context.Context, sent map[int32][]Sent) error {
	why := ""
	for {
		ok, w, err := c.Drained(ctx, sent)
		if ok {
			return nil
		}
		if err != nil {
			why = err.Error()
		} else {
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
//     decoding refuses; a difference counts as lost.
func (c *Cluster) Verify(ctx context.Context, sent map[int32][]Sent) (Verdict, error) {
	var v Verdict
	counts, err := c.auditCounts(ctx)
	if err != nil {
		return v, err
	}
	s, err := stores.Open(ctx, c.cfg.StoreURL, stores.Options{})
	if err != nil {
		return v, err
	}
	defer s.Close()

	dc := decode.Config{KeyField: "id", MaxBytes: MaxMessageBytes}
	want := map[string]string{}
	wantDead := map[string]string{} // unit@position -> reason
	parts := make([]int, 0, len(sent))
	for p := range sent {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	for _, p := range parts {
		for _, r := range sent[int32(p)] {
			v.Produced++
			pos := strconv.FormatInt(r.Offset, 10)
			key := fmt.Sprintf("audit/%d@%s", p, pos)
			switch n := counts[key]; {
			case n == 0:
				v.Lost++
				v.problem("lost: %s never applied", key)
			case n > 1:
				v.Duplicated += n - 1
				v.problem("duplicated: %s applied %d times", key, n)
			}
			delete(counts, key)
			m := r.Msg
			m.Position = pos
			op := dc.Record(m)
			switch op.Kind {
			case persistence.OpUpsert:
				want[op.Key] = string(op.Doc)
			case persistence.OpDelete:
				delete(want, op.Key)
			case persistence.OpDeadLetter:
				wantDead[fmt.Sprintf("orders/%d@%s", p, pos)] = op.Reason
			}
		}
	}
	for k, n := range counts {
		v.Duplicated += n
		v.problem("duplicated: %s applied but never produced", k)
	}

	got := map[string]string{}
	for after := ""; ; {
		rs, err := s.Records(ctx, "orders", after, 5000)
		if err != nil {
			return v, err
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
			v.problem("lost: orders key %s is %q, want %q", k, clip(got[k]), clip(doc))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			v.Lost++
			v.problem("lost: orders key %s should be deleted", k)
		}
	}
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{Source: "orders"})
	if err != nil {
		return v, err
	}
	for _, dl := range dls {
		k := dl.Unit + "@" + dl.Position
		if _, ok := wantDead[k]; !ok {
			v.Lost++
			v.problem("lost: %s dead-lettered (%s) but decodes fine", k, dl.Reason)
		}
		delete(wantDead, k)
	}
	for k, reason := range wantDead {
		v.Lost++
		v.problem("lost: %s should be dead-lettered (%s)", k, reason)
	}
	v.DeadLettered = len(dls)
	v.Applied = v.Produced - v.DeadLettered
	return v, nil
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

// auditCounts reads the audit table: "unit@position" -> rows.
func (c *Cluster) auditCounts(ctx context.Context) (map[string]int, error) {
	const q = `SELECT unit, position, count(*) FROM drover_audit WHERE source = 'audit' GROUP BY unit, position`
	out := map[string]int{}
	add := func(unit, pos string, n int) { out[unit+"@"+pos] = n }
	u := c.cfg.StoreURL
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("demo: read audit: %w", err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("demo: read audit: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var unit, pos string
			var n int
			if err := rows.Scan(&unit, &pos, &n); err != nil {
				return nil, err
			}
			add(unit, pos, n)
		}
		return out, rows.Err()
	}
	path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//")
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("demo: read audit: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("demo: read audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var unit, pos string
		var n int
		if err := rows.Scan(&unit, &pos, &n); err != nil {
			return nil, err
		}
		add(unit, pos, n)
	}
	return out, rows.Err()
}
