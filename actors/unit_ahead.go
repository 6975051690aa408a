package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
)

// ---- fetch ahead (stream units) ----
//
// While a stream unit applies a fetch, its reader is idle: when the fetch
// left it behind the broker (behind), the unit fetches the next batch
// meanwhile, at most one ahead. Its result is held until every batch of
// the fetch before committed, then handled as if the fetch had just
// returned (onFetch), so the order, the checkpoint filter and the error
// handling are those of the sequential loop. If the apply
// ends first, the fetch ahead becomes the main-line fetch (awaited: it
// counts in inflight and a stop cancels it like any fetch).
//
// A fetch ahead is dropped, never applied, when the apply fails (the
// retry applies the same batch again), when the unit stops (the
// checkpoint says where the next owner starts) and when the lease is lost
// (the incarnation ends). The reader was then moved past what the unit
// applied: after a failure the unit opens the reader again at the
// checkpoint before it fetches (reopen); a stop closes it anyway.
//
// Queue units do not fetch ahead: the messages received ahead would stay
// invisible, and so away from the other slots, while the batch before is
// applied, and would need their deadline extended and a nack on every
// failure; a queue that wants more throughput is given more slots.

// fetchAhead is the unit's fetch ahead of the apply in flight.
type fetchAhead struct {
	seq      uint64             // of the latest fetch ahead; a result of another is dropped
	cancel   context.CancelFunc // non-nil while it is in flight
	awaited  bool               // in flight as the main-line fetch (the apply ended first)
	result   *fetchResult       // arrived while the apply was in flight
	reopened bool               // dropped after the reader moved: open it again before the next fetch
}

// behind reports whether a fetch left the reader behind the broker: it
// came back full, or with a lag. Only then is the next fetch worth
// starting during the apply: a unit that has caught up would fetch ahead
// only the first messages that arrive during the apply and apply the
// others a batch later, in more and smaller batches, than one that
// fetches after its apply and finds all of them. A fetch that ended its
// partition has nothing after it. A broker that cannot count what is left
// but dates it (Kinesis: MillisBehindLatest) is behind when it dates it.
func behind(r brokers.Result, batchSize int) bool {
	return !r.End && (len(r.Messages) >= batchSize || r.Lag > 0 || (r.Lag < 0 && !r.Oldest.IsZero()))
}

// fetchesAhead: the unit fetches ahead of its applies.
func (u *unitActor) fetchesAhead() bool {
	return !u.spec.isQueue() && !u.node.tuning.NoFetchAhead
}

// startAhead fetches the next batch beside the apply just issued.
func (u *unitActor) startAhead(ctx actor.Context) {
	a := &u.ahead
	if !u.fetchesAhead() || a.cancel != nil || a.result != nil || u.conn == nil || u.phase.stopping() ||
		u.node.controls.paused(u.spec.Name, u.id) {
		return
	}
	a.seq++
	a.cancel = u.runSideJob(ctx, "fetch", u.fetchJob(true, a.seq))
}

func (u *unitActor) onAhead(ctx actor.Context, r fetchResult) {
	a := &u.ahead
	if r.seq != a.seq || a.cancel == nil {
		return // dropped
	}
	a.cancel = nil
	if !a.awaited {
		a.result = &r
		return
	}
	a.awaited = false
	u.inflight--
	u.onFetch(ctx, r)
}

// dropAhead forgets the fetch ahead, cancelling it if it is in flight;
// an awaited one is the main-line fetch and is left alone.
func (u *unitActor) dropAhead() {
	a := &u.ahead
	if a.awaited {
		return
	}
	if a.cancel == nil && a.result == nil {
		return
	}
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	a.result = nil
	a.reopened = true
	u.node.env.trace("ahead-dropped", u.id, "")
}

// next goes on once a fetch is applied: the reader opened again after a
// dropped fetch ahead, the fetch ahead, or a new fetch.
func (u *unitActor) next(ctx actor.Context) {
	a := &u.ahead
	switch {
	case u.phase.stopping():
		u.dropAhead()
		u.fetch(ctx) // ends the stop
	case u.seekPending():
		u.startSeek(ctx)
	case a.reopened && a.cancel == nil && a.result == nil:
		a.reopened = false
		u.open(ctx)
	case a.result != nil:
		r := *a.result
		a.result = nil
		u.onFetch(ctx, r)
	case a.cancel != nil:
		a.awaited = true
		u.inflight++
		u.cancelFetch = a.cancel
	default:
		u.fetch(ctx)
	}
}

// fetchJob is a fetch on the unit's connection: a Waker's does not wait
// (it is woken when messages may be there), others wait up to max_wait.
func (u *unitActor) fetchJob(ahead bool, seq uint64) func(context.Context) any {
	conn, spec, dec := u.conn, u.spec, u.decoder
	wait := spec.MaxWait
	if conn.waker() != nil {
		wait = 0
	}
	return u.timeFetch(func(c context.Context) any {
		var r brokers.Result
		err := conn.use(func() (err error) {
			if conn.reader != nil {
				r, err = conn.reader.Fetch(c, spec.BatchSize, wait)
			} else {
				r, err = conn.receiver.Receive(c, spec.BatchSize, wait)
			}
			return err
		})
		var schemaErr error
		if err == nil && spec.Handler == nil {
			schemaErr = dec.Resolve(c, r.Messages) // the schemas a wire format needs, before the actor decodes
		}
		return fetchResult{fetched: r, err: err, schemaErr: schemaErr, ahead: ahead, seq: seq}
	})
}

// ---- an idle unit waits for its Waker ----

// wakeWait is an idle unit's arrangement with its Waker.
type wakeWait struct {
	seq       uint64 // of the latest arrangement; a call for another is dropped
	cancel    func() // non-nil while the unit waits
	safety    clock.Timer
	passivate clock.Timer // PassivateAfter (unit_passive.go)
	since     time.Time   // the wait began
}

// waker is the connection's Waker, or nil.
func (r *brokerConn) waker() brokers.Waker {
	if w, ok := r.reader.(brokers.Waker); ok {
		return w
	}
	if w, ok := r.receiver.(brokers.Waker); ok {
		return w
	}
	return nil
}

// waitWake makes an idle unit wait for its Waker's call instead of
// fetching again; false when its connection is no Waker.
func (u *unitActor) waitWake(ctx actor.Context) bool {
	conn := u.conn
	if conn == nil || u.phase.stopping() {
		return false
	}
	w := conn.waker()
	if w == nil {
		return false
	}
	u.wake.seq++
	self, current, root, seq := ctx.Self(), u.incarnation, ctx.ActorSystem().Root, u.wake.seq
	var cancel func()
	err := conn.use(func() error {
		cancel = w.Wake(func() {
			if !current.ended.Load() {
				root.Send(self, &woken{incarnation: current, seq: seq})
			}
		})
		return nil
	})
	if err != nil {
		return false // closed meanwhile: the fetch reports it
	}
	u.wake.cancel = cancel
	u.wake.since = u.now()
	u.wake.safety = u.after(ctx, u.node.tuning.WakeSafety, timerWake)
	u.armPassivate(ctx)
	return true
}

// cancelWake ends the wait for the Waker, if the unit waits.
func (u *unitActor) cancelWake() {
	w := &u.wake
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	for _, t := range []*clock.Timer{&w.safety, &w.passivate} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
}

func (u *unitActor) onWoken(ctx actor.Context, seq uint64) {
	if seq != u.wake.seq || u.wake.cancel == nil {
		return // an arrangement cancelled or already answered
	}
	u.cancelWake()
	u.fetch(ctx)
}

// onWakeSafety: not woken within WakeSafety; look anyway.
func (u *unitActor) onWakeSafety(ctx actor.Context) {
	if u.wake.cancel == nil {
		return
	}
	u.wake.safety = nil
	u.node.env.trace("wake-timeout", u.id, u.node.tuning.WakeSafety.Round(time.Millisecond).String())
	u.cancelWake()
	u.fetch(ctx)
}
