package testkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/events"
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
	locks       map[string]time.Time // unit -> until when its lease row is locked (LockUnit)
	// refuse: table -> the documents a constraint of it refuses
	// (RefuseDocs); maxBytes: the most bytes one Apply may carry
	// (LimitBatchBytes), 0 no limit.
	refuse   map[string]func(doc []byte) bool
	maxBytes int
	// raceNext: Apply calls left to refuse as a race would (RaceNext);
	// raced: the units whose last Apply it refused (their next passes);
	// split: unit#token whose last Apply was refused (RaceNext or
	// RefuseDocs), so the runtime splits the batch: its next batch has
	// other bounds
	raceNext int
	raced    map[string]bool
	split    map[string]bool
}

// StoreFaults injects failures into the cluster's store calls.
type StoreFaults struct{ a *auditStore }

// FailNext makes the next n calls of op fail before they reach the store.
// op is acquire, renew, release, apply, checkpoint, init or any.
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

// RefuseDocs makes the store refuse every document written to table for
// which refuse is true, as a CHECK constraint would: an Apply that would
// write one (the last upsert of its key in the batch) fails, before it
// reaches the store and whatever the store is, with an error matching
// persistence.ErrPermanent, and writes nothing. Writes of handlers through
// their Tx are not checked (the memory store's Refuse does that). Settle
// does not lift it (a constraint is what the store is, not a passing
// fault); nil does.
func (f StoreFaults) RefuseDocs(table string, refuse func(doc []byte) bool) {
	if refuse == nil {
		delete(f.a.refuse, table)
		return
	}
	if f.a.refuse == nil {
		f.a.refuse = map[string]func([]byte) bool{}
	}
	f.a.refuse[table] = refuse
}

// raceMark is in the message of the refusals of RaceNext, so that a dead
// letter they caused can be told from the others.
const raceMark = "concurrent CREATE TABLE IF NOT EXISTS (simulated race)"

// RaceNext makes the next n Apply calls fail, before they reach the store,
// with an error matching persistence.ErrPermanent that the same batch would
// not meet again: as PostgreSQL fails all but the first of concurrent
// transactions that each run CREATE TABLE IF NOT EXISTS, with a unique
// violation on its catalog. A unit's Apply after a refused one passes (the
// race is over once reported). A record must never be dead-lettered for it
// (the "refused" invariant).
func (f StoreFaults) RaceNext(n int) { f.a.raceNext += max(n, 0) }

// LimitBatchBytes makes every Apply that carries more than n bytes
// (persistence.Op.Size summed over the ops the store writes) fail, before
// it reaches the store, with an error that is not permanent: as
// PostgreSQL's 1 GB limit on a message fails it, as a protocol violation
// that ends the connection. Settle does not lift it; 0 does.
func (f StoreFaults) LimitBatchBytes(n int) { f.a.maxBytes = max(n, 0) }

// refused is the error the faults of RefuseDocs and LimitBatchBytes fail b
// with, if any.
func (a *auditStore) refused(b *persistence.Batch) error {
	if a.maxBytes > 0 {
		size := 0
		for i := range b.Ops {
			if b.Ops[i].Kind != persistence.OpMessage {
				size += b.Ops[i].Size()
			}
		}
		if size > a.maxBytes {
			return fmt.Errorf("invalid message length: %d bytes over the limit of %d (simulated protocol violation, connection closed)", size, a.maxBytes)
		}
	}
	if refuse := a.refuse[b.Table]; refuse != nil {
		for _, op := range persistence.Fold(b.Ops) {
			if op.Kind == persistence.OpUpsert && refuse(op.Doc) {
				return persistence.Refused(fmt.Errorf("new row of %q in %s violates a check constraint (simulated)", op.Key, b.Table))
			}
		}
	}
	return nil
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
	if err := a.waitLock(ctx, req.Unit); err != nil {
		return persistence.Lease{}, fmt.Errorf("acquire %w", err)
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
	if err := a.waitLock(ctx, l.Unit); err != nil {
		return persistence.Lease{}, fmt.Errorf("renew %w", err)
	}
	return a.Store.Renew(ctx, l, ttl)
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
	if err := a.waitLock(ctx, l.Unit); err != nil {
		return fmt.Errorf("release %w", err)
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
	if err := a.beforeApply(ctx, b); err != nil {
		return persistence.Applied{}, err
	}
	res, err := a.Store.Apply(ctx, b)
	return a.afterApply(b, res, err)
}

// ApplyGroup models persistence.GroupApplier as the stores implement it:
// each batch meets the faults, row locks and refusals of an Apply, one
// after the other (a row lock one batch waits for delays the whole
// group); those that pass go to the store's own ApplyGroup in one call,
// and the ledger checks each commit.
func (a *auditStore) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	a.c.groups++
	out := make([]persistence.GroupResult, len(bs))
	var pass []*persistence.Batch
	var at []int
	for i, b := range bs {
		if err := a.beforeApply(ctx, b); err != nil {
			out[i].Err = err
			continue
		}
		pass, at = append(pass, b), append(at, i)
	}
	var rs []persistence.GroupResult
	if g, ok := a.Store.(persistence.GroupApplier); ok {
		rs = g.ApplyGroup(ctx, pass)
	} else {
		rs = persistence.ApplyEach(ctx, a.Store, pass)
	}
	for k, i := range at {
		out[i].Applied, out[i].Err = a.afterApply(pass[k], rs[k].Applied, rs[k].Err)
	}
	return out
}

// beforeApply is what happens to a batch before the store writes it:
// injected faults, a locked lease row, a refusal.
func (a *auditStore) beforeApply(ctx context.Context, b *persistence.Batch) error {
	if err := a.inject("apply"); err != nil {
		return err
	}
	if err := a.waitLock(ctx, b.Unit); err != nil {
		return fmt.Errorf("apply %w", err)
	}
	if err := a.refused(b); err != nil {
		a.split[tokenKey(b.Unit, b.Lease.Token)] = true
		return fmt.Errorf("apply %s: %w", b.Unit, err)
	}
	switch {
	case a.raced[b.Unit]:
		delete(a.raced, b.Unit)
	case a.raceNext > 0:
		a.raceNext--
		a.raced[b.Unit] = true
		a.split[tokenKey(b.Unit, b.Lease.Token)] = true
		return fmt.Errorf("apply %s: %w", b.Unit, persistence.Refused(fmt.Errorf(
			`duplicate key value violates unique constraint "pg_type_typname_nsp_index": %s`, raceMark)))
	}
	return nil
}

// afterApply records a committed batch in the ledger and loses the answer
// of an ambiguous commit.
func (a *auditStore) afterApply(b *persistence.Batch, res persistence.Applied, err error) (persistence.Applied, error) {
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

func (c *Cluster) onAcquired(l persistence.Lease) {
	k := tokenKey(l.Unit, l.Token)
	if prev, ok := c.led.tokens[k]; ok && prev != l.Owner {
		c.violate("fencing", fmt.Sprintf("token %d of %s given to %s and %s", l.Token, l.Unit, prev, l.Owner))
	}
	c.led.tokens[k] = l.Owner
	if l.PrevOwner != "" && l.PrevOwner != l.Owner {
		c.led.takeovers[k] = l
	}
	c.event("lease", l.Owner, l.Unit, fmt.Sprintf("token=%d", l.Token))
	if c.scale != nil {
		sid := 0
		if n := c.nodes[l.Owner]; n != nil {
			sid = n.sid
		}
		c.scale.acquired(l, sid)
	}
	led := c.led
	if !led.acquired[l.Unit] {
		led.acquired[l.Unit] = true
		if led.initial[l.Unit] && led.latest[sourceOf(l.Unit)] {
			// At the latest when its first owner got it, the unit's start is
			// as late as it may be: what was produced before is not expected.
			led.excuseBefore(l.Unit, led.lastPublished[l.Unit])
		}
	}
	if c.partitioned() {
		led.leaseChanges[l.Unit]++
	}
	for i := range c.led.kills {
		kl := &c.led.kills[i]
		if kl.units[l.Unit] {
			delete(kl.units, l.Unit)
			f := Failover{Unit: l.Unit, From: kl.node, To: l.Owner, KilledAt: kl.at, Took: c.s.now.Sub(kl.at), Clean: kl.clean}
			if until, ok := kl.orphaned[l.Unit]; ok {
				f.Orphaned = until.Sub(kl.at)
			}
			c.led.failovers = append(c.led.failovers, f)
		}
	}
}

func sourceOf(unit string) string {
	if i := strings.LastIndexByte(unit, '/'); i >= 0 {
		return unit[:i]
	}
	return unit
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
	c.checkPaused(b)
	if to, ok := l.takeovers[k]; ok {
		delete(l.takeovers, k)
		c.checkTakeoverLogged(to)
	}
	if !b.Dedupe {
		if since, ok := l.recreated[b.Unit]; ok && (b.Reset || !c.s.now.Before(since.Add(c.cfg.RecreateQuiet))) {
			// from now on the unit reads the recreated stream
			delete(l.recreated, b.Unit)
			l.unitGen[b.Unit] = l.gen[sourceOf(b.Unit)]
			delete(l.lastPos, b.Unit)
		}
	}
	if b.Reset {
		c.onReset(b)
	}
	c.checkSubRead(b)
	dup := map[string]bool{}
	for _, id := range res.Duplicates {
		dup[id] = true
	}
	n := 0
	for _, op := range b.Ops {
		if op.Kind == persistence.OpDeadLetter && strings.Contains(op.Reason, raceMark) {
			c.violate("refused", fmt.Sprintf("%s position %s dead-lettered for a refusal the store would not repeat: %s", b.Unit, op.Position, op.Reason))
		}
		var key string
		if b.Dedupe {
			if dup[op.MessageID] {
				continue
			}
			key = queueKey(b.Source, l.queueGen[b.Source][op.MessageID], op.MessageID)
		} else {
			key = streamKey(b.Unit, l.unitGen[b.Unit], op.Position)
			if last, ok := l.lastPos[b.Unit]; ok && brokers.ComparePositions(op.Position, last) <= 0 {
				c.violate("order", fmt.Sprintf("%s applied position %s after %s (token %d, %s)", b.Unit, op.Position, last, b.Lease.Token, b.Lease.Owner))
			}
			l.lastPos[b.Unit] = op.Position
		}
		if l.aborted[key] {
			c.violate("aborted", fmt.Sprintf("%s of an aborted transaction applied (token %d, %s)", key, b.Lease.Token, b.Lease.Owner))
		}
		l.applied[key]++
		if _, ok := l.produced[key]; ok && l.applied[key] == 1 && !l.skipped[key] {
			l.unapplied--
		}
		if l.applied[key] == 2+l.reapply[key] {
			c.violate("duplicated", fmt.Sprintf("%s applied %d times (last by %s, token %d)", key, l.applied[key], b.Lease.Owner, b.Lease.Token))
		}
		n++
	}
	l.totalApplied += int64(n)
	c.event("commit", b.Lease.Owner, b.Unit, fmt.Sprintf("token=%d n=%d dup=%d cp=%s fin=%v reset=%v", b.Lease.Token, n, len(res.Duplicates), b.Checkpoint, b.Finished, b.Reset))
}

// onReset checks a checkpoint reset: a unit's first one records its
// resolved start (resolved once); later ones must have a cause the testkit
// made (a recreated stream).
func (c *Cluster) onReset(b *persistence.Batch) {
	l := c.led
	l.resets[b.Unit]++
	if b.SeekDone > 0 {
		c.checkSeekExpiry(b)
	}
	switch {
	case b.SeekDone > 0 && l.takeSeek(b.Unit):
		l.sought(b) // an operator's seek (its control row's): a cause
		l.armSubSeek(b)
	case l.resets[b.Unit] == 1:
		// the unit's start, resolved once — even while a seek of it
		// waits (a seek asked before the unit first opened must not be
		// taken for its start, and its own reset then for a second one)
		if l.initial[b.Unit] && l.latest[b.Source] && l.unitGen[b.Unit] == 0 {
			l.excuseBefore(b.Unit, brokers.Applied(b.Checkpoint))
		}
	case l.takeSeek(b.Unit):
		l.sought(b) // an operator's seek: a cause
		l.armSubSeek(b)
	case c.subSeekReset(b):
		// on_position_reset after a seek to a sub-position its record
		// does not have (simkplseek.go): a cause
	case l.allowReset[b.Unit] > 0:
		l.allowReset[b.Unit]--
	default:
		c.violate("resolved-once", fmt.Sprintf("%s: checkpoint reset to %s with no cause (start resolved again?), token %d by %s",
			b.Unit, b.Checkpoint, b.Lease.Token, b.Lease.Owner))
	}
	if pos := brokers.Applied(b.Checkpoint); pos != "" {
		l.lastPos[b.Unit] = pos
	} else {
		delete(l.lastPos, b.Unit)
	}
}

// partitioned reports whether a network partition is in force.
func (c *Cluster) partitioned() bool {
	for k := range c.disturbed {
		if strings.HasPrefix(k, "partition:") {
			return true
		}
	}
	return false
}

// checkTakeoverLogged: a takeover whose token commits a batch is in the
// new owner's event log, naming the holder and token it took the lease
// from (the owner's process acquired that token: it applies with it).
func (c *Cluster) checkTakeoverLogged(l persistence.Lease) {
	n := c.nodes[l.Owner]
	if n == nil || n.events == nil {
		return
	}
	for _, e := range n.events.Query(events.Filter{Unit: l.Unit}) {
		if e.Kind == events.KindTakeover && e.Token == l.Token {
			if e.PrevOwner != l.PrevOwner || e.PrevToken != l.PrevToken {
				c.violate("events", fmt.Sprintf("%s logged the takeover of %s token %d from %s token %d; the store gave it from %s token %d",
					l.Owner, l.Unit, l.Token, e.PrevOwner, e.PrevToken, l.PrevOwner, l.PrevToken))
			}
			return
		}
	}
	c.violate("events", fmt.Sprintf("%s applied %s with token %d, taken over from %s, without a takeover in its event log",
		l.Owner, l.Unit, l.Token, l.PrevOwner))
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
	// MaxLeaseChanges is the most acquisitions of one unit's lease during
	// one network partition.
	MaxLeaseChanges int
}

// ChurnBound bounds the acquisitions of one unit's lease during one
// network partition: 2 + 2 per node event meanwhile (a kill, stop, restart,
// supervisor crash, or the end of a fault). A holder that still renews its
// leases keeps them whatever the views say, so views that disagree move
// nothing by themselves; a unit changes hands because a node event makes
// it (away and back: 2 each), plus once when the partition begins (the
// isolated side, cut off from the store too, stops renewing) and once when
// it ends.
func ChurnBound(events int) int { return 2 + 2*events }

// checkChurn checks the lease changes of the partition episode that ends
// now, and starts a new count.
func (c *Cluster) checkChurn() {
	l := c.led
	bound := ChurnBound(l.partEvents)
	for _, u := range slices.Sorted(maps.Keys(l.leaseChanges)) {
		n := l.leaseChanges[u]
		l.maxChanges = max(l.maxChanges, n)
		if n > bound {
			c.check("lease-churn", fmt.Sprintf("%s changed hands %d times during one partition with %d node events (bound %d)", u, n, l.partEvents, bound))
		}
	}
	clear(l.leaseChanges)
	l.partEvents = 0
}

// Report checks the invariants over everything produced so far. Call it
// after Settle: a message still in flight counts as lost.
func (c *Cluster) Report() Report {
	l := c.led
	r := Report{Produced: len(l.produced), Applied: l.totalApplied, Failovers: append([]Failover(nil), l.failovers...)}
	r.Violations = append(r.Violations, l.violations...)
	var lost []string
	for k := range l.produced {
		if l.applied[k] == 0 && !l.skipped[k] {
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
	for k, n := range l.applied {
		if n > 1+l.reapply[k] {
			r.Duplicated += n - 1 - l.reapply[k]
		}
	}
	r.Violations = append(r.Violations, l.reapplyViolations()...)
	if len(l.leaseChanges) > 0 {
		c.checkChurn()
	}
	r.MaxLeaseChanges = l.maxChanges
	if c.cfg.FailoverBound > 0 {
		for _, f := range l.failovers {
			if bound := c.cfg.FailoverBound + f.Orphaned; f.Clean && f.Took > bound {
				r.Violations = append(r.Violations, Violation{"failover", fmt.Sprintf("%s moved from %s to %s after %s (bound %s)", f.Unit, f.From, f.To, f.Took, bound)})
			}
		}
		for _, k := range l.kills {
			if !k.clean {
				continue
			}
			for _, u := range slices.Sorted(maps.Keys(k.units)) {
				bound := c.cfg.FailoverBound
				if until, ok := k.orphaned[u]; ok {
					bound += until.Sub(k.at)
				}
				if c.s.now.Sub(k.at) > bound {
					r.Violations = append(r.Violations, Violation{"failover", fmt.Sprintf("%s of killed %s not owned again after %s", u, k.node, c.s.now.Sub(k.at))})
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.queues)) {
		for i, m := range c.queues[name].Misuses() {
			if i == 3 {
				break
			}
			r.Violations = append(r.Violations, Violation{"receiver", name + ": " + m})
		}
	}
	r.Violations = append(r.Violations, c.checks...)
	r.Violations = append(r.Violations, c.endChecks()...)
	return r
}
