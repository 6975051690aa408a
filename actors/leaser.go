package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// leaser renews every lease the node's units hold, in one store call per
// round (persistence.Leases.RenewLeases), every RenewInterval. One
// statement per node and round keeps a short interval cheap with thousands
// of units; the short interval is what lets others take over a dead
// node's leases soon after failure detection (a holder absent from their
// view is taken over once its last renewal or heartbeat is older than
// RenewInterval + TakeoverMargin), while a holder that still renews keeps
// its leases whatever anyone's view says. A round is the node's heartbeat:
// the store rewrites a lease row only when its expiry is within half its
// TTL, so an idle node costs a row write per lease per TTL/2, and the
// leaser passes every lease back as the store last returned it (its
// ExpiresAt decides which are due). What a round sends is kept and sent
// again while no lease changed (renewBatch), so a round of idle units
// costs the leaser one comparison per lease and no lookup.
//
// Units register a lease when they acquire it and drop it when they
// release or lose it. A lease the store reports lost is told to its unit
// (leaseLostNote, with the token, so that a unit that acquired the lease
// again meanwhile ignores it). Renewal errors are not failures of the
// units: fencing keeps an expired lease safe, and the apply path reports
// store trouble; the leaser logs them (rate-limited) and tries again at
// the next round.
type leaser struct {
	node   *nodeEnv
	orphan []persistence.Lease   // of an earlier process of this node, not released yet (swept)
	held   map[string]*heldLease // by unit; outlives a restart of the actor (leaseTable)
	batch  *renewBatch           // what the next round sends; nil when a lease changed since
	busy   bool                  // a round is in flight
	timer  clock.Timer
	every  time.Duration
	table  *leaseTable

	failing  int       // consecutive failed rounds
	loggedAt time.Time // last WARN about failed rounds
}

type heldLease struct {
	lease  leaseRef // the node is its owner
	ttl    time.Duration
	pid    *actor.PID
	source string
	alone  bool // a renewal of this lease alone is in flight
}

// messages
type (
	// leaseHeld registers a lease a unit acquired.
	leaseHeld struct {
		lease  persistence.Lease
		ttl    time.Duration
		pid    *actor.PID
		source string
	}
	// leaseDropped unregisters a unit's lease (released, lost, stopped).
	leaseDropped struct {
		unit  string
		token int64
	}
	// leaseLostNote tells a unit the store no longer has its lease (or the
	// supervisor of a passive unit, which has no actor: unit says which).
	leaseLostNote struct {
		unit  string
		token int64
	}
	// leaseOwner tells the leaser where to send a lost lease's note from
	// now on: a unit passivates (its supervisor) or is activated again (its
	// new actor). When the lease is no longer held, the note goes there at
	// once: it was lost on the way (sent to an actor that stopped).
	leaseOwner struct {
		unit  string
		token int64
		pid   *actor.PID
	}
	// storeBack tells the node (and its supervisors) that the store answers
	// again after failed rounds: units waiting out a restart backoff caused
	// by the outage start again now.
	storeBack struct{}
	renewTick struct{}
	// renewedOne is the result of renewing one lease alone.
	renewedOne struct {
		unit  string
		token int64
		lease persistence.Lease
		err   error
	}
	renewDone struct {
		batch *renewBatch
		sent  []persistence.Lease // as the round passed them (batch.sent)
		// ans is the store's answer (persistence.RenewChanges): what
		// differs from sent
		ans persistence.RenewAnswer
		err error
		// controls is the controls table as the round read it after
		// renewing (nil: not read).
		controls *controlsRead
	}
)

// leaseTable is the leaser's registry of held leases. It is made once per
// node and handed to every instance of the leaser actor, so that a restart
// of the actor (a bug) does not forget the leases it must renew. Only the
// current instance touches it, on its own goroutine.
type leaseTable struct {
	held map[string]*heldLease
	// minTTL is the shortest lease TTL of a source added at run time
	// (leaseTTL), 0 if none is shorter than the node started with.
	minTTL time.Duration
}

func newLeaseTable() *leaseTable { return &leaseTable{held: map[string]*heldLease{}} }

func newLeaser(node *nodeEnv, minTTL time.Duration, t *leaseTable) *leaser {
	if t.minTTL > 0 && (minTTL <= 0 || t.minTTL < minTTL) {
		minTTL = t.minTTL
	}
	return &leaser{node: node, held: t.held, every: renewEvery(node.tuning.RenewInterval, minTTL), table: t}
}

// renewEvery is how often leases are renewed: every interval, or every
// third of the shortest TTL when that is shorter.
func renewEvery(interval, minTTL time.Duration) time.Duration {
	if minTTL > 0 && minTTL/3 < interval {
		return minTTL / 3
	}
	return interval
}

func (l *leaser) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		l.schedule(ctx)
	case *leaseHeld:
		if !mutate.On(mutate.StaleRenewBatch) {
			l.batch = nil
		}
		l.held[m.lease.Unit] = &heldLease{lease: refOf(m.lease), ttl: m.ttl, pid: m.pid, source: m.source}
	case *leaseTTL:
		// a source added at run time: its leases must be renewed in time
		if every := renewEvery(l.every, m.ttl); every < l.every {
			l.every = every
			if l.table.minTTL <= 0 || m.ttl < l.table.minTTL {
				l.table.minTTL = m.ttl
			}
			if l.timer != nil {
				l.timer.Stop()
				l.schedule(ctx)
			}
		}
	case *leaseDropped:
		if h, ok := l.held[m.unit]; ok && h.lease.token == m.token {
			l.drop(m.unit)
		}
	case *leaseOwner:
		if h, ok := l.held[m.unit]; ok && h.lease.token == m.token {
			h.pid = m.pid
		} else {
			ctx.Send(m.pid, &leaseLostNote{unit: m.unit, token: m.token})
		}
	case *renewTick:
		l.timer = nil
		l.round(ctx)
		if len(l.orphan) > 0 {
			l.retryOrphans(ctx)
		}
		l.schedule(ctx)
	case *renewDone:
		l.busy = false
		l.done(ctx, m)
	case *renewedOne:
		l.doneOne(ctx, m)
	case *swept:
		l.orphan = append(l.orphan, m.left...)
	case *orphansDone:
		l.orphan = m.left
	case *actor.Stopping, *actor.Restarting:
		if l.timer != nil {
			l.timer.Stop()
			l.timer = nil
		}
	}
}

// orphansDone is the result of another try at the earlier process's
// leases.
type orphansDone struct{ left []persistence.Lease }

// retryOrphans tries again to release the leases of an earlier process of
// this node that the start-up sweep found locked, leaving alone those a
// unit of this node holds by now.
func (l *leaser) retryOrphans(ctx actor.Context) {
	var try []persistence.Lease
	for _, o := range l.orphan {
		if _, ok := l.held[o.Unit]; !ok {
			try = append(try, o)
		}
	}
	l.orphan = nil
	if len(try) == 0 {
		return
	}
	store := l.node.env.Store
	self, root := ctx.Self(), ctx.ActorSystem().Root
	l.node.env.Executor.Go(exec.WithLabel(l.node.ctx, "sweep"), func(c context.Context) any {
		cur, err := store.List(c)
		if err != nil {
			return &orphansDone{left: try}
		}
		var left []persistence.Lease
		for _, o := range try {
			if !stillOwned(cur, o) {
				continue // moved on meanwhile
			}
			if !releaseOwn(c, store, o) {
				left = append(left, o)
			}
		}
		return &orphansDone{left: left}
	}, func(v any) { root.Send(self, v) })
}

// stillOwned reports whether lease o is still recorded as it was.
func stillOwned(ls []persistence.Lease, o persistence.Lease) bool {
	for _, l := range ls {
		if l.Unit == o.Unit {
			return l.Owner == o.Owner && l.Token == o.Token
		}
	}
	return false
}

// drop forgets the lease of unit.
func (l *leaser) drop(unit string) {
	delete(l.held, unit)
	l.batch = nil
}

// renewBatch is what a round sends: every held lease in sent, grouped by
// TTL (one RenewLeases call per TTL, in the order of ttls; each group is
// a part of sent, so sent is in the order of the answers). A round in
// flight reads it, so the actor changes it only when no round is in
// flight: when that round's answer comes back (done), where it writes the
// leases extended into it. A lease registered, dropped or renewed alone
// (possibly while a round is in flight) makes the leaser build a new one
// for the next round. Idle units thus cost no per-lease work in the
// leaser in most rounds.
type renewBatch struct {
	sent  []persistence.Lease
	ttls  []time.Duration
	byTTL map[time.Duration][]persistence.Lease
}

// newBatch is the batch of the leases held now.
func (l *leaser) newBatch() *renewBatch {
	b := &renewBatch{sent: make([]persistence.Lease, 0, len(l.held)), byTTL: map[time.Duration][]persistence.Lease{}}
	one, owner := true, l.node.env.Node
	// in the units' order; sorted anew each time rather than kept: the
	// sorted list was 40 bytes per held lease (issue 12 item 5), and a
	// batch is built only when a lease changed
	for _, u := range slices.Sorted(maps.Keys(l.held)) {
		h := l.held[u]
		if len(b.ttls) == 0 {
			b.ttls = append(b.ttls, h.ttl)
		} else if h.ttl != b.ttls[0] {
			one = false
		}
		b.sent = append(b.sent, h.lease.full(owner))
	}
	switch {
	case len(b.ttls) == 0:
		b.ttls = append(b.ttls, time.Minute) // a probe: RenewLeases of nothing
	case one:
		b.byTTL[b.ttls[0]] = b.sent // the usual case: no second slice of every lease
	default:
		groups := map[time.Duration][]persistence.Lease{}
		for _, sl := range b.sent {
			ttl := l.held[sl.Unit].ttl
			groups[ttl] = append(groups[ttl], sl)
		}
		b.ttls = slices.Sorted(maps.Keys(groups))
		b.sent = b.sent[:0]
		for _, ttl := range b.ttls {
			b.sent = append(b.sent, groups[ttl]...)
		}
		at := 0
		for _, ttl := range b.ttls {
			n := len(groups[ttl])
			b.byTTL[ttl] = b.sent[at : at+n : at+n]
			at += n
		}
	}
	return b
}

// sameLease reports whether a and b agree on everything a store reads of
// a lease it renews (RenewedAt is the store's answer, never read back).
func sameLease(a, b persistence.Lease) bool {
	return a.Unit == b.Unit && a.Owner == b.Owner && a.Token == b.Token &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.AcquiredAt.Equal(b.AcquiredAt)
}

func (l *leaser) schedule(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	l.timer = l.node.env.Clock.AfterFunc(l.every, func() { root.Send(self, &renewTick{}) })
}

// round renews every registered lease unless a round is still in flight
// (a slow store: the next tick tries again). With no lease held the round
// still asks the store (RenewLeases of none): the node learns that the
// store is reachable again as soon as it is, which cuts the restart
// backoff of units that failed on the outage short (storeBack).
func (l *leaser) round(ctx actor.Context) {
	if l.busy {
		return
	}
	if l.batch == nil {
		l.batch = l.newBatch()
	}
	b := l.batch
	l.busy = true
	store, owner := l.node.env.Store, l.node.env.Node
	self, root := ctx.Self(), ctx.ActorSystem().Root
	var controls func(context.Context) *controlsRead
	if !mutate.On(mutate.PauseOnlyLocal) {
		controls = readControls(l.node)
	}
	l.node.env.Executor.Go(exec.WithLabel(l.node.ctx, "renew"), func(c context.Context) any {
		d := &renewDone{batch: b, sent: b.sent}
		defer func() {
			if d.err == nil && controls != nil {
				d.controls = controls(c) // the round's one read of the controls table (controls.go)
			}
		}()
		for _, ttl := range b.ttls {
			a, err := persistence.RenewChanges(c, store, owner, b.byTTL[ttl], ttl)
			if err != nil {
				d.err = err
				return d
			}
			if len(b.ttls) == 1 {
				d.ans = a
				break
			}
			// the groups are consecutive parts of sent: their answers
			// joined are in sent's order
			d.ans.Changed = append(d.ans.Changed, a.Changed...)
			d.ans.Lost = append(d.ans.Lost, a.Lost...)
			d.ans.Skipped = append(d.ans.Skipped, a.Skipped...)
			d.ans.Beat = a.Beat // the last group's heartbeat
		}
		return d
	}, func(v any) { root.Send(self, v) })
}

func (l *leaser) done(ctx actor.Context, d *renewDone) {
	now := l.node.env.Clock.Now()
	if d.err != nil {
		l.failing++
		l.node.env.trace("renew-failed", l.node.env.Node, d.err.Error())
		if l.failing == 1 || now.Sub(l.loggedAt) >= l.node.tuning.RetryLogEvery {
			l.loggedAt = now
			l.node.env.logger().Warn("renew leases", "leases", len(d.sent), "failed_rounds", l.failing, "error", d.err)
		}
		return
	}
	if m := l.node.controls.applyRead(d.controls); m != nil {
		if node := l.node.nodePID.Load(); node != nil {
			ctx.Send(node, m)
		}
	}
	if l.failing > 0 {
		l.node.env.logger().Info("the store answers again", "after_failed_rounds", l.failing)
		l.node.env.trace("store-back", l.node.env.Node, "")
		l.failing = 0
		if node := l.node.nodePID.Load(); node != nil {
			ctx.Send(node, &storeBack{})
		}
	}
	// The answer is what differs from d.sent, in its order: most rounds
	// extend no lease or few, and a lease not in the answer was renewed
	// as sent, which changes nothing (the leaser keeps its lease, the
	// tree is left alone) and costs nothing. A changed one is written
	// into the batch too, if it is still the next round's (no round is
	// in flight now), so the next round sends it as the store returned
	// it.
	patch := d.batch == l.batch
	i := 0
	for _, nl := range d.ans.Changed {
		for i < len(d.sent) && d.sent[i].Unit != nl.Unit {
			i++
		}
		if i < len(d.sent) && sameLease(d.sent[i], nl) {
			continue
		}
		h, ok := l.held[nl.Unit]
		if !ok || h.lease.token != nl.Token {
			continue // dropped or acquired again meanwhile
		}
		ref := refOf(nl)
		moved := h.lease.expires != ref.expires
		switch {
		case patch && i < len(d.sent): // d.sent[i] is nl's lease
			l.batch.sent[i] = nl
		case h.lease != ref || nl.Owner != l.node.env.Node:
			l.batch, patch = nil, false
		}
		h.lease = ref
		if moved {
			l.node.reg.leaseRenewed(h.source, nl.Unit, nl.Token, nl.ExpiresAt)
		}
	}
	if len(d.ans.Lost) == 0 && len(d.ans.Skipped) == 0 {
		return
	}
	sent := make(map[string]int64, len(d.sent))
	for _, sl := range d.sent {
		sent[sl.Unit] = sl.Token
	}
	for _, u := range d.ans.Lost {
		h, ok := l.held[u]
		if !ok || h.lease.token != sent[u] {
			continue
		}
		l.drop(u)
		l.node.env.trace("renew-lost", u, fmt.Sprintf("token=%d", h.lease.token))
		ctx.Send(h.pid, &leaseLostNote{unit: u, token: h.lease.token})
	}
	// A skipped lease's row was locked, by the unit's own apply (the
	// fence) or by a transaction that vanished. Renew it alone, in a job
	// of its own that may wait for the lock (store.timeout bounds it)
	// without holding up the next rounds.
	for _, u := range d.ans.Skipped {
		tok, ok := sent[u]
		if !ok {
			continue
		}
		h, ok := l.held[u]
		if !ok || h.lease.token != tok || h.alone {
			continue
		}
		h.alone = true
		store, lease, ttl := l.node.env.Store, h.lease.full(l.node.env.Node), h.ttl
		self, root := ctx.Self(), ctx.ActorSystem().Root
		l.node.env.trace("renew-alone", u, fmt.Sprintf("token=%d", lease.Token))
		l.node.env.Executor.Go(exec.WithLabel(l.node.ctx, "renew-one"), func(c context.Context) any {
			nl, err := store.Renew(c, lease, ttl)
			return &renewedOne{unit: lease.Unit, token: lease.Token, lease: nl, err: err}
		}, func(v any) { root.Send(self, v) })
	}
}

func (l *leaser) doneOne(ctx actor.Context, r *renewedOne) {
	h, ok := l.held[r.unit]
	if !ok || h.lease.token != r.token {
		return
	}
	h.alone = false
	switch {
	case errors.Is(r.err, persistence.ErrLeaseLost):
		l.drop(r.unit)
		l.node.env.trace("renew-lost", r.unit, fmt.Sprintf("token=%d", r.token))
		ctx.Send(h.pid, &leaseLostNote{unit: r.unit, token: r.token})
	case r.err != nil:
		l.node.env.trace("renew-failed", r.unit, r.err.Error()) // the next round tries again
	default:
		h.lease, l.batch = refOf(r.lease), nil
		l.node.reg.leaseRenewed(h.source, r.unit, r.token, r.lease.ExpiresAt)
	}
}
