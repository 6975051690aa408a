package actors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
)

// The world of one unit actor under a script (unitscript_test.go): a
// manual clock, a dispatcher whose mailbox runs the harness makes on the
// test goroutine, and an executor that queues every job until the script
// completes it. Nothing here starts a goroutine; protoactor's own are idle.

var scriptEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rel prints t as an offset from the script's epoch ("+1.25s").
func rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(scriptEpoch).String()
}

// ---- clock ----

type scriptTimer struct {
	w       *unitWorld
	id      int
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
	fired   bool
}

func (t *scriptTimer) Stop() bool {
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	t.w.printf("timer #%d stopped", t.id)
	return true
}

type scriptClock struct{ w *unitWorld }

func (c scriptClock) Now() time.Time { return c.w.now }

func (c scriptClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	w := c.w
	w.nextTimer++
	t := &scriptTimer{w: w, id: w.nextTimer, at: w.now.Add(d), d: d, f: f}
	w.timers = append(w.timers, t)
	w.printf("timer #%d armed: %s%s (fires at %s)", t.id, d, w.timerName(d), rel(t.at))
	return t
}

// timerName names a timer by its duration when that is one of the
// harness's tuning values (every one is distinct); backoffs are jittered
// and stay unnamed.
func (w *unitWorld) timerName(d time.Duration) string {
	tu := w.ne.tuning
	switch d {
	case tu.WakeSafety:
		return " [wake safety]"
	case tu.AcquireRetry:
		return " [acquire retry]"
	case tu.ParentPoll:
		return " [parent poll]"
	case tu.StopTimeout:
		return " [stop deadline]"
	case tu.PassivateAfter:
		return " [passivate]"
	case tu.PositionCheck:
		return " [position check]"
	case w.renewEvery:
		return " [renew round]"
	case w.extendEvery:
		return " [extend deadline]"
	}
	return ""
}

// next is the earliest pending timer, or nil.
func (w *unitWorld) nextDue() *scriptTimer {
	var best *scriptTimer
	for _, t := range w.timers {
		if t.stopped || t.fired {
			continue
		}
		if best == nil || t.at.Before(best.at) || (t.at.Equal(best.at) && t.id < best.id) {
			best = t
		}
	}
	return best
}

// advance moves time to until, firing every timer due on the way in
// order, each followed by the mailbox runs it causes.
func (w *unitWorld) advance(until time.Time) {
	for {
		t := w.nextDue()
		if t == nil || t.at.After(until) {
			break
		}
		w.now = t.at
		t.fired = true
		w.printf("timer #%d fired at %s", t.id, rel(w.now))
		t.f()
		w.settle()
	}
	if w.now.Before(until) {
		w.now = until
	}
}

// ---- dispatcher ----

type scriptDispatcher struct{ w *unitWorld }

func (d scriptDispatcher) Schedule(fn func()) { d.w.mailboxes = append(d.w.mailboxes, fn) }
func (d scriptDispatcher) Throughput() int    { return 300 }

// settle runs mailboxes until none is scheduled: every message sent so far
// has been handled.
func (w *unitWorld) settle() {
	for len(w.mailboxes) > 0 {
		fn := w.mailboxes[0]
		w.mailboxes = w.mailboxes[1:]
		fn()
	}
}

// ---- executor ----

type scriptJob struct {
	id        int
	label     string
	ctx       context.Context
	cancel    context.CancelFunc
	job       func(context.Context) any
	deliver   func(any)
	cancelled bool
	done      bool
}

type scriptExecutor struct{ w *unitWorld }

// autoRun are the jobs the harness runs as soon as they are issued: side
// effects the script has nothing to decide about.
var autoRun = map[string]bool{"close": true}

func (e scriptExecutor) Go(ctx context.Context, job func(context.Context) any, deliver func(any)) context.CancelFunc {
	w := e.w
	w.nextJob++
	label := exec.Label(ctx)
	if label == "" {
		label = "job"
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &scriptJob{id: w.nextJob, label: label, ctx: jctx, cancel: cancel, job: job, deliver: deliver}
	if autoRun[label] {
		w.printf("job #%d %s (run at once)", j.id, label)
		j.done = true
		deliver(job(jctx))
		cancel()
		return cancel
	}
	w.jobs = append(w.jobs, j)
	w.printf("job #%d %s issued", j.id, label)
	return func() {
		cancel()
		if !j.done && !j.cancelled {
			j.cancelled = true
			w.printf("job #%d %s cancelled", j.id, j.label)
		}
	}
}

// pauser records the waits of a job (exec.Pause, long polls): under the
// script a job's time does not pass, its result is what it finds now.
type pauser struct{ w *unitWorld }

func (p pauser) Pause(d time.Duration) { p.w.printf("  waits %s", d) }

// run runs job j to its end, calls between, and delivers the job's
// result.
func (w *unitWorld) run(j *scriptJob, between func() error) error {
	state := ""
	if j.cancelled || j.ctx.Err() != nil {
		state = " (cancelled)"
	}
	w.printf("job #%d %s runs%s", j.id, j.label, state)
	j.done = true
	v := j.job(exec.WithPauser(j.ctx, pauser{w}))
	j.cancel()
	err := between()
	j.deliver(v)
	w.settle()
	return err
}

// pendingJob finds the oldest pending job with label, or by "#id".
func (w *unitWorld) pendingJob(ref string) *scriptJob {
	for _, j := range w.jobs {
		if j.done {
			continue
		}
		if j.label == ref || "#"+fmt.Sprint(j.id) == ref {
			return j
		}
	}
	return nil
}

func (w *unitWorld) pendingList() []string {
	var out []string
	for _, j := range w.jobs {
		if !j.done {
			s := fmt.Sprintf("job #%d %s", j.id, j.label)
			if j.cancelled || j.ctx.Err() != nil {
				s += " (cancelled)"
			}
			out = append(out, s)
		}
	}
	for _, t := range w.timers {
		if !t.stopped && !t.fired {
			out = append(out, fmt.Sprintf("timer #%d %s%s at %s", t.id, t.d, w.timerName(t.d), rel(t.at)))
		}
	}
	return out
}

// ---- the tree row ----

// rowString prints the unit's entry of the tree (architecture §10): the
// contract, not the actor's fields.
func rowString(s UnitStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s", s.State)
	if s.LeaseToken != 0 {
		fmt.Fprintf(&b, " token=%d", s.LeaseToken)
	}
	if s.LeaseExpiresAt != nil {
		fmt.Fprintf(&b, " expires=%s", rel(*s.LeaseExpiresAt))
	}
	if s.Position != "" {
		fmt.Fprintf(&b, " position=%s", s.Position)
	}
	for _, c := range []struct {
		name string
		n    int64
	}{{"lag", s.Lag}, {"received", s.Received}, {"applied", s.Applied}, {"acked", s.Acked},
		{"rejected", s.Rejected}, {"dead", s.DeadLettered}, {"restarts", s.Restarts}} {
		if c.n != 0 {
			fmt.Fprintf(&b, " %s=%d", c.name, c.n)
		}
	}
	if s.LastPullAt != nil {
		fmt.Fprintf(&b, " pulled=%s", rel(*s.LastPullAt))
	}
	if s.NextRetryAt != nil {
		fmt.Fprintf(&b, " next_retry=%s", rel(*s.NextRetryAt))
	}
	if s.LastError != "" {
		at := "-"
		if s.LastErrorAt != nil {
			at = rel(*s.LastErrorAt)
		}
		fmt.Fprintf(&b, " error@%s=%q", at, s.LastError)
	}
	if s.Passive {
		b.WriteString(" passive")
	}
	return b.String()
}

func (w *unitWorld) row() (UnitStatus, bool) {
	for _, src := range w.ne.reg.snapshot() {
		for _, u := range src.Units {
			if u.Unit == w.unitID {
				return u, true
			}
		}
	}
	return UnitStatus{}, false
}

// ---- what the unit sends ----

// scriptParent stands in for the unit's supervisor: it spawns the unit,
// reports what the unit tells it and how it ends, and restarts it when the
// script says so (a failure suspends it until then).
type scriptParent struct {
	w   *unitWorld
	sup actor.Supervisor
}

type (
	spawnScriptUnit   struct{}
	restartScriptUnit struct{}
	// activateScriptUnit spawns the passive unit again from its record.
	activateScriptUnit struct{ how resumeKind }
)

func (p *scriptParent) Receive(ctx actor.Context) {
	w := p.w
	switch m := ctx.Message().(type) {
	case *spawnScriptUnit:
		w.gen = w.ne.reg.addUnit(w.spec.Name, w.unitID)
		p.spawn(ctx, nil)
	case *activateScriptUnit:
		if w.record == nil {
			w.printf("parent: no passive unit")
			return
		}
		r := w.record
		w.record = nil
		if r.cancel != nil {
			r.cancel()
		}
		r.resume = m.how
		w.ne.reg.unit(w.spec.Name, w.unitID, w.gen, func(st *treeUnit) { st.passive = false })
		w.printf("parent: activates the unit (%s)", m.how)
		p.spawn(ctx, r)
	case *restartScriptUnit:
		if p.sup == nil {
			w.printf("parent: nothing to restart")
			return
		}
		w.printf("parent: restarts the unit")
		p.sup.RestartChildren(w.unit)
		p.sup = nil
	case *actor.Terminated:
		exit := "none"
		switch w.exit.Load() {
		case exitLeaseLost:
			exit = "lease lost"
		case exitFinished:
			exit = "finished"
		case exitPassive:
			exit = "passivated"
		}
		w.printf("parent: unit terminated (exit: %s)", exit)
		if r := w.handoff.Swap(nil); r != nil {
			w.exit.Store(0)
			w.record = r
			w.ne.reg.unit(w.spec.Name, w.unitID, w.gen, func(st *treeUnit) { st.passive = true })
			w.printf("parent: keeps token=%d position=%s checkpoint=%s due=%s", r.lease.token, r.position, r.checkpoint, rel(r.due.time()))
			ctx.Send(w.ne.leaser, &leaseOwner{unit: w.unitID, token: r.lease.token, pid: ctx.Self()})
		}
	case *leaseLostNote:
		w.printf("parent: lease of %s token=%d lost", m.unit, m.token)
	case *unitEvent:
		if m.kind == evHealthy {
			w.printf("parent: unit reports healthy")
		} else {
			w.printf("parent: unit event %d", m.kind)
		}
	case *qualitySample:
		w.printf("parent: quality sample of %d rows", m.stats.Rows())
	case *actor.Started, *actor.Stopping, *actor.Stopped:
	default:
		w.printf("parent: %T", m)
	}
}

// spawn spawns the unit, from record r when it is passive.
func (p *scriptParent) spawn(ctx actor.Context, r *passiveUnit) {
	w := p.w
	props := actor.PropsFromProducer(func() actor.Actor {
		u := newUnit(w.ne, w.spec, w.part, true)
		u.gen = w.gen
		u.exit = &w.exit
		if w.passivate {
			u.handoff = &w.handoff
		}
		u.record, r = r, nil
		return u
	}, w.ne.props()...)
	w.unit = ctx.SpawnPrefix(props, w.part.ID)
}

// HandleFailure makes the parent the unit's supervisor strategy.
func (p *scriptParent) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, _ *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	p.w.printf("parent: unit failed: %v", reason)
	p.sup = sup
}

// scriptLeaser is the node's leaser as the unit sees it: it prints what the
// unit registers and drops, and runs the real leaser when the script
// renews leases.
type scriptLeaser struct {
	w    *unitWorld
	real *leaser // nil: the script does not renew
}

func (l *scriptLeaser) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *leaseHeld:
		l.w.printf("leaser: registers %s token=%d ttl=%s", m.lease.Unit, m.lease.Token, m.ttl)
	case *leaseDropped:
		l.w.printf("leaser: drops %s token=%d", m.unit, m.token)
	case *leaseOwner:
		to := "the unit"
		if m.pid.Equal(l.w.parent) {
			to = "the parent"
		}
		l.w.printf("leaser: notes of %s token=%d go to %s", m.unit, m.token, to)
	}
	if l.real != nil {
		l.real.Receive(ctx)
	}
}

// ---- the store and the stream, printing each call a job makes ----

// injected holds, per operation, the error a script injects into its next
// call.
type injected map[string]error

// take returns the error injected into the next call of op, and forgets it.
func (in injected) take(op string) error {
	err := in[op]
	delete(in, op)
	return err
}

// scriptStore is the memory store with every lease, checkpoint and apply
// call printed, and one error the script injects into the next call of an
// operation.
type scriptStore struct {
	persistence.Store
	w      *unitWorld
	inject injected
}

func (s *scriptStore) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	if err := s.inject.take("acquire"); err != nil {
		s.w.printf("  store: acquire %s owner=%s -> %v", req.Unit, req.Owner, err)
		return persistence.Lease{}, err
	}
	l, err := s.Store.Acquire(ctx, req)
	s.w.printf("  store: acquire %s owner=%s ttl=%s -> %s", req.Unit, req.Owner, req.TTL, leaseOrErr(l, err))
	return l, err
}

func leaseOrErr(l persistence.Lease, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("token=%d expires=%s", l.Token, rel(l.ExpiresAt))
}

func (s *scriptStore) Release(ctx context.Context, l persistence.Lease) error {
	err := s.inject.take("release")
	if err == nil {
		err = s.Store.Release(ctx, l)
	}
	s.w.printf("  store: release %s token=%d -> %s", l.Unit, l.Token, errOr(err, "ok"))
	return err
}

func (s *scriptStore) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s token=%d until %s", l.Unit, l.Token, rel(l.ExpiresAt)))
	}
	if err := s.inject.take("renew"); err != nil {
		s.w.printf("  store: renew [%s] -> %v", strings.Join(parts, ", "), err)
		return nil, nil, err
	}
	renewed, lost, err := s.Store.RenewLeases(ctx, owner, ls, ttl)
	var got []string
	for _, l := range renewed {
		got = append(got, fmt.Sprintf("%s until %s", l.Unit, rel(l.ExpiresAt)))
	}
	s.w.printf("  store: renew [%s] -> renewed [%s] lost [%s]%s", strings.Join(parts, ", "), strings.Join(got, ", "),
		strings.Join(lost, ", "), errSuffix(err))
	return renewed, lost, err
}

func (s *scriptStore) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	if err := s.inject.take("checkpoint"); err != nil {
		s.w.printf("  store: checkpoint %s -> %v", unit, err)
		return persistence.Checkpoint{}, err
	}
	cp, err := s.Store.Checkpoint(ctx, unit)
	if err != nil {
		s.w.printf("  store: checkpoint %s -> %v", unit, err)
	} else {
		s.w.printf("  store: checkpoint %s -> %q finished=%t", unit, cp.Position, cp.Finished)
	}
	return cp, err
}

func (s *scriptStore) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	var kinds []string
	for _, op := range b.Ops {
		k := "upsert"
		switch op.Kind {
		case persistence.OpDelete:
			k = "delete"
		case persistence.OpDeadLetter:
			k = "dead"
		case persistence.OpMessage:
			k = "message"
		}
		kinds = append(kinds, op.Position+":"+k)
	}
	desc := fmt.Sprintf("%s token=%d ops=[%s] checkpoint=%q", b.Unit, b.Lease.Token, strings.Join(kinds, " "), b.Checkpoint)
	if b.Finished {
		desc += " finished"
	}
	if b.Reset {
		desc += " reset"
	}
	if err := s.inject.take("apply"); err != nil {
		s.w.printf("  store: apply %s -> %v", desc, err)
		return persistence.Applied{}, err
	}
	a, err := s.Store.Apply(ctx, b)
	if err == nil && len(a.Duplicates) > 0 {
		s.w.printf("  store: apply %s -> ok, duplicates %v", desc, a.Duplicates)
	} else {
		s.w.printf("  store: apply %s -> %s", desc, errOr(err, "ok"))
	}
	return a, err
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func errSuffix(err error) string {
	if err != nil {
		return " error " + err.Error()
	}
	return ""
}

// scriptStream is the memory stream with its calls printed and an error
// the script injects into the next open or fetch.
type scriptStream struct {
	brokers.Stream
	w      *unitWorld
	inject injected
	wake   bool // its readers are brokers.Wakers
}

func (s *scriptStream) Resolve(ctx context.Context, part string, mode brokers.StartMode) (brokers.Start, error) {
	st, err := s.Stream.(brokers.Resolver).Resolve(ctx, part, mode)
	s.w.printf("  broker: resolve %s %s -> %s%s", part, mode, brokers.StartPosition(st), errSuffix(err))
	return st, err
}

func (s *scriptStream) Open(ctx context.Context, part string, start brokers.Start) (brokers.Reader, error) {
	at := brokers.StartPosition(start)
	if err := s.inject.take("open"); err != nil {
		s.w.printf("  broker: open %s at %s -> %v", part, at, err)
		return nil, err
	}
	r, err := s.Stream.Open(ctx, part, start)
	s.w.printf("  broker: open %s at %s -> %s", part, at, errOr(err, "ok"))
	if err != nil {
		return nil, err
	}
	if s.wake {
		return &scriptWaker{scriptReader{Reader: r, s: s}}, nil
	}
	return &scriptReader{Reader: r, s: s}, nil
}

// scriptWaker is a scriptReader that passes the memory reader's Wake on,
// printing each arrangement, call and cancellation.
type scriptWaker struct{ scriptReader }

func (r *scriptWaker) Wake(f func()) func() {
	w := r.s.w
	w.nextWake++
	id := w.nextWake
	w.printf("  broker: wake #%d arranged", id)
	cancel := r.Reader.(brokers.Waker).Wake(func() {
		w.printf("  broker: wake #%d called", id)
		f()
	})
	return func() {
		w.printf("  broker: wake #%d cancelled", id)
		cancel()
	}
}

type scriptReader struct {
	brokers.Reader
	s *scriptStream
}

func (r *scriptReader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	w := r.s.w
	if err := r.s.inject.take("fetch"); err != nil {
		w.printf("  broker: fetch max=%d wait=%s -> %v", max, wait, err)
		return brokers.Result{}, err
	}
	res, err := r.Reader.Fetch(ctx, max, wait)
	if err != nil {
		w.printf("  broker: fetch max=%d wait=%s -> %v", max, wait, err)
		return res, err
	}
	var pos []string
	for _, m := range res.Messages {
		pos = append(pos, m.Position)
	}
	end := ""
	if res.End {
		end = " end"
	}
	w.printf("  broker: fetch max=%d wait=%s -> [%s] lag=%d%s", max, wait, strings.Join(pos, " "), res.Lag, end)
	return res, nil
}

// ---- output ----

func (w *unitWorld) printf(format string, args ...any) {
	w.out = append(w.out, fmt.Sprintf(format, args...))
}

// flush returns what happened since the last flush, with the tree row
// when it changed.
func (w *unitWorld) flush() string {
	if w.ne != nil {
		if r, ok := w.row(); ok {
			if s := rowString(r); s != w.lastRow {
				w.printf("row: %s", s)
				w.lastRow = s
			}
		}
	}
	out := w.out
	w.out = nil
	if len(out) == 0 {
		return "(nothing)"
	}
	return strings.Join(out, "\n")
}

// scriptQueue is the memory queue with its receivers' calls printed and an
// error the script injects into the next open, receive, ack or nack.
type scriptQueue struct {
	brokers.Queue
	w      *unitWorld
	inject injected
}

func (q *scriptQueue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	if err := q.inject.take("open"); err != nil {
		q.w.printf("  broker: open %s -> %v", slot, err)
		return nil, err
	}
	r, err := q.Queue.Open(ctx, slot)
	q.w.printf("  broker: open %s -> %s", slot, errOr(err, "ok"))
	if err != nil {
		return nil, err
	}
	return &scriptReceiver{Receiver: r, q: q}, nil
}

// scriptReceiver implements brokers.Extender like the memory receiver.
type scriptReceiver struct {
	brokers.Receiver
	q *scriptQueue
}

func msgIDs(msgs []brokers.Message) string {
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, " ")
}

func (r *scriptReceiver) Receive(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	w := r.q.w
	if err := r.q.inject.take("fetch"); err != nil {
		w.printf("  broker: receive max=%d wait=%s -> %v", max, wait, err)
		return brokers.Result{}, err
	}
	res, err := r.Receiver.Receive(ctx, max, wait)
	if err != nil {
		w.printf("  broker: receive max=%d wait=%s -> %v", max, wait, err)
		return res, err
	}
	w.printf("  broker: receive max=%d wait=%s -> [%s]", max, wait, msgIDs(res.Messages))
	return res, nil
}

func (r *scriptReceiver) Ack(ctx context.Context, msgs []brokers.Message) error {
	err := r.q.inject.take("ack")
	if err == nil {
		err = r.Receiver.Ack(ctx, msgs)
	}
	r.q.w.printf("  broker: ack [%s] -> %s", msgIDs(msgs), errOr(err, "ok"))
	return err
}

func (r *scriptReceiver) Nack(ctx context.Context, msgs []brokers.Message, delay time.Duration) error {
	err := r.q.inject.take("nack")
	if err == nil {
		err = r.Receiver.Nack(ctx, msgs, delay)
	}
	r.q.w.printf("  broker: nack [%s] delay=%s -> %s", msgIDs(msgs), delay, errOr(err, "ok"))
	return err
}

func (r *scriptReceiver) Extend(ctx context.Context, msgs []brokers.Message, d time.Duration) error {
	err := r.Receiver.(brokers.Extender).Extend(ctx, msgs, d)
	r.q.w.printf("  broker: extend [%s] by %s -> %s", msgIDs(msgs), d, errOr(err, "ok"))
	return err
}
