package testkit

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// auditStore wraps the cluster's store. It records every commit and every
// lease acquisition for the invariant checks, and injects store faults the
// same way whatever the store underneath (memory or SQLite), so a
// simulation gives the same run on both.
type auditStore struct {
	persistence.Store
	c *Cluster

	failNext    map[string]int // op -> calls left to fail
	afterCommit int            // Apply calls that commit, then report an error
	down        error
}

// StoreFaults injects failures into the cluster's store calls.
type StoreFaults struct{ a *auditStore }

// FailNext makes the next n calls of op fail before they reach the store.
// op is acquire, renew, release, apply, checkpoint or any.
func (f StoreFaults) FailNext(op string, n int) { f.a.failNext[op] += n }

// FailAfterCommit makes the next n Apply calls commit and then return an
// error: the caller cannot know its batch is in.
func (f StoreFaults) FailAfterCommit(n int) { f.a.afterCommit += n }

// SetDown makes every store call fail until SetDown(false): the database is
// unreachable.
func (f StoreFaults) SetDown(down bool) {
	if down {
		f.a.down = fmt.Errorf("store unreachable (simulated): %w", persistence.ErrInjected)
	} else {
		f.a.down = nil
	}
}

func (a *auditStore) inject(op string) error {
	if a.down != nil {
		return a.down
	}
	for _, k := range []string{op, "any"} {
		if a.failNext[k] > 0 {
			a.failNext[k]--
			return fmt.Errorf("%s: %w", op, persistence.ErrInjected)
		}
	}
	return nil
}

func (a *auditStore) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	if err := a.inject("acquire"); err != nil {
		return persistence.Lease{}, err
	}
	l, err := a.Store.Acquire(ctx, req)
	if err == nil {
		a.c.onAcquired(l)
	}
	return l, err
}

func (a *auditStore) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	if err := a.inject("renew"); err != nil {
		return persistence.Lease{}, err
	}
	return a.Store.Renew(ctx, l, ttl)
}

func (a *auditStore) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	if err := a.inject("renew"); err != nil {
		return nil, nil, err
	}
	return a.Store.RenewLeases(ctx, owner, ls, ttl)
}

func (a *auditStore) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	if err := a.inject("init"); err != nil {
		return nil, err
	}
	return a.Store.InitSource(ctx, source, units)
}

func (a *auditStore) Release(ctx context.Context, l persistence.Lease) error {
	if err := a.inject("release"); err != nil {
		return err
	}
	return a.Store.Release(ctx, l)
}

func (a *auditStore) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	if err := a.inject("checkpoint"); err != nil {
		return persistence.Checkpoint{}, err
	}
	return a.Store.Checkpoint(ctx, unit)
}

func (a *auditStore) Checkpoints(ctx context.Context, source string) ([]persistence.Checkpoint, error) {
	if err := a.inject("checkpoint"); err != nil {
		return nil, err
	}
	return a.Store.Checkpoints(ctx, source)
}

func (a *auditStore) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	if err := a.inject("apply"); err != nil {
		return persistence.Applied{}, err
	}
	res, err := a.Store.Apply(ctx, b)
	if err != nil {
		return res, err
	}
	a.c.onCommitted(b, res)
	if a.afterCommit > 0 {
		a.afterCommit--
		return persistence.Applied{}, fmt.Errorf("connection lost after commit (simulated): %w", persistence.ErrInjected)
	}
	return res, nil
}

// ledger is what the invariant checks compare: what was produced and what
// the store committed.
type ledger struct {
	produced     map[string]produced // key -> message
	unapplied    int                 // produced messages not committed yet
	applied      map[string]int      // key -> commits that applied it
	lastPos      map[string]string   // unit -> last applied position (streams)
	tokens       map[string]string   // unit#token -> owner that acquired it
	appliers     map[string]string   // unit#token -> owner that applied with it
	kills        []kill
	failovers    []Failover
	violations   []Violation
	totalApplied int64
}

type produced struct {
	source, unit, position string
}

type kill struct {
	node  string
	at    time.Time
	units map[string]bool // units whose lease it held
	clean bool
}

// Failover is how long one unit of a killed node waited for a new owner.
type Failover struct {
	Unit     string
	From     string
	To       string
	KilledAt time.Time
	Took     time.Duration
	// Clean is false when other faults were active at the time, so the
	// failover bound does not apply.
	Clean bool
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string // lost, duplicated, order, fencing, failover
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

func newLedger() *ledger {
	return &ledger{
		produced: map[string]produced{}, applied: map[string]int{}, lastPos: map[string]string{},
		tokens: map[string]string{}, appliers: map[string]string{},
	}
}

func streamKey(unit, pos string) string      { return unit + "@" + pos }
func queueKey(source, id string) string      { return source + "#" + id }
func tokenKey(unit string, tok int64) string { return fmt.Sprintf("%s#%d", unit, tok) }

// expect records a published message.
func (l *ledger) expect(key string, p produced) {
	if _, ok := l.produced[key]; ok {
		return
	}
	l.produced[key] = p
	if l.applied[key] == 0 {
		l.unapplied++
	}
}

func (c *Cluster) onAcquired(l persistence.Lease) {
	k := tokenKey(l.Unit, l.Token)
	if prev, ok := c.led.tokens[k]; ok && prev != l.Owner {
		c.violate("fencing", fmt.Sprintf("token %d of %s given to %s and %s", l.Token, l.Unit, prev, l.Owner))
	}
	c.led.tokens[k] = l.Owner
	c.event("lease", l.Owner, l.Unit, fmt.Sprintf("token=%d", l.Token))
	for i := range c.led.kills {
		kl := &c.led.kills[i]
		if kl.units[l.Unit] {
			delete(kl.units, l.Unit)
			c.led.failovers = append(c.led.failovers, Failover{Unit: l.Unit, From: kl.node, To: l.Owner,
				KilledAt: kl.at, Took: c.s.now.Sub(kl.at), Clean: kl.clean})
		}
	}
}

func (c *Cluster) onCommitted(b *persistence.Batch, res persistence.Applied) {
	l := c.led
	k := tokenKey(b.Unit, b.Lease.Token)
	if acq, ok := l.tokens[k]; ok && acq != b.Lease.Owner {
		c.violate("fencing", fmt.Sprintf("%s applied with token %d acquired by %s", b.Lease.Owner, b.Lease.Token, acq))
	}
	if prev, ok := l.appliers[k]; ok && prev != b.Lease.Owner {
		c.violate("fencing", fmt.Sprintf("two appliers for %s token %d: %s and %s", b.Unit, b.Lease.Token, prev, b.Lease.Owner))
	}
	l.appliers[k] = b.Lease.Owner
	dup := map[string]bool{}
	for _, id := range res.Duplicates {
		dup[id] = true
	}
	n := 0
	for _, op := range b.Ops {
		var key string
		if b.Dedupe {
			if dup[op.MessageID] {
				continue
			}
			key = queueKey(b.Source, op.MessageID)
		} else {
			key = streamKey(b.Unit, op.Position)
			if last, ok := l.lastPos[b.Unit]; ok && brokers.ComparePositions(op.Position, last) <= 0 {
				c.violate("order", fmt.Sprintf("%s applied position %s after %s (token %d, %s)", b.Unit, op.Position, last, b.Lease.Token, b.Lease.Owner))
			}
			l.lastPos[b.Unit] = op.Position
		}
		l.applied[key]++
		if _, ok := l.produced[key]; ok && l.applied[key] == 1 {
			l.unapplied--
		}
		if l.applied[key] == 2 {
			c.violate("duplicated", fmt.Sprintf("%s applied twice (last by %s, token %d)", key, b.Lease.Owner, b.Lease.Token))
		}
		n++
	}
	l.totalApplied += int64(n)
	c.event("commit", b.Lease.Owner, b.Unit, fmt.Sprintf("token=%d n=%d dup=%d cp=%s fin=%v", b.Lease.Token, n, len(res.Duplicates), b.Checkpoint, b.Finished))
}

func (c *Cluster) violate(inv, detail string) {
	c.led.violations = append(c.led.violations, Violation{Invariant: inv, Detail: detail})
	c.event("VIOLATION", "", inv, detail)
}

// Report is the outcome of a run.
type Report struct {
	Produced   int
	Applied    int64 // messages committed, dead letters included
	Lost       int   // produced messages never committed
	Duplicated int   // messages committed more than once
	Violations []Violation
	Failovers  []Failover
}

// Report checks the invariants over everything produced so far. Call it
// after Settle: a message still in flight counts as lost.
func (c *Cluster) Report() Report {
	l := c.led
	r := Report{Produced: len(l.produced), Applied: l.totalApplied, Failovers: append([]Failover(nil), l.failovers...)}
	r.Violations = append(r.Violations, l.violations...)
	var lost []string
	for k := range l.produced {
		if l.applied[k] == 0 {
			lost = append(lost, k)
		}
	}
	sort.Strings(lost)
	r.Lost = len(lost)
	for i, k := range lost {
		if i == 5 {
			r.Violations = append(r.Violations, Violation{"lost", fmt.Sprintf("... and %d more", len(lost)-5)})
			break
		}
		r.Violations = append(r.Violations, Violation{"lost", k + " never applied"})
	}
	for _, n := range l.applied {
		if n > 1 {
			r.Duplicated += n - 1
		}
	}
	if c.cfg.FailoverBound > 0 {
		for _, f := range l.failovers {
			if f.Clean && f.Took > c.cfg.FailoverBound {
				r.Violations = append(r.Violations, Violation{"failover", fmt.Sprintf("%s moved from %s to %s after %s (bound %s)", f.Unit, f.From, f.To, f.Took, c.cfg.FailoverBound)})
			}
		}
		for _, k := range l.kills {
			if !k.clean {
				continue
			}
			for u := range k.units {
				if c.s.now.Sub(k.at) > c.cfg.FailoverBound {
					r.Violations = append(r.Violations, Violation{"failover", fmt.Sprintf("%s of killed %s not owned again after %s", u, k.node, c.s.now.Sub(k.at))})
				}
			}
		}
	}
	return r
}
