package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// ---- seek: an operator moves a stream unit's checkpoint ----
//
// A seek is carried out by the unit's actor, on the node that owns the
// unit, under its lease token: Node.Seek reaches the unit through its
// source's supervisor (a passive unit is activated for it). The unit
// waits for the main-line job in flight (an apply finishes its batch; a
// fetch is cancelled), drops what it holds and what it fetched ahead,
// resolves the target (brokers.SeekStart), opens a reader there (which
// checks the position against the broker: a position it does not hold is
// refused and nothing is written), writes the new checkpoint by a fenced
// Apply with Reset (backwards too), and reads on from the new reader: the
// messages after the new checkpoint are applied (again), those at or
// below it are not. A seek that fails changes nothing but the reader,
// which is opened again at the stored checkpoint.
//
// requestSeek is the one entry: a control row the owner picks up (the
// controls table, unit_seekrow.go) is a call of it with the row's seek id
// and target.

// Seek asks the owner of a stream unit to move its checkpoint.
type Seek struct {
	// Unit is "<source>/<partition>".
	Unit string
	// To is the target: a position (read again from it), "earliest",
	// "latest", an RFC 3339 time (the first message stamped at or after
	// it) or "after:<position>" (read from just past it).
	To string
	// ID is the control's id (the controls table's seek_id), 0 when none.
	ID int64
	// By and Reason are who asks and why, for the record.
	By, Reason string
}

// SeekResult is what a seek did: what the controls table (seek_done_id)
// and the audit record need.
type SeekResult struct {
	Seek
	// Node is the node that carried it out.
	Node string
	// From is the checkpoint before the seek; Position the one written.
	From, Position string
	// Token is the lease token the checkpoint was written under.
	Token int64
	At    time.Time
}

var (
	// ErrNotOwned: the unit has no actor on this node (another node owns
	// it, or nobody does right now).
	ErrNotOwned = errors.New("unit not owned by this node")
	// ErrSeekConflict: the unit cannot seek in its state now (no lease
	// yet, stopping, restarting, another seek in progress); ask again.
	ErrSeekConflict = errors.New("unit cannot seek now")
	// ErrSeekExpired: a seek of the controls table waited longer than
	// the seek expiry (Tuning.SeekExpiry) for its unit's owner: it is
	// marked done and never carried out.
	ErrSeekExpired = errors.New("seek expired")
)

// seekUnit carries a Seek to its unit.
type seekUnit struct {
	Seek
	target  brokers.SeekTarget
	bad     error // the row's target does not parse (rowSeek)
	reply   func(SeekResult, error)
	started bool // the seek job runs
}

// answer calls the reply once.
func (m *seekUnit) answer(r SeekResult, err error) {
	if f := m.reply; f != nil {
		m.reply = nil
		f(r, err)
	}
}

func (m *seekUnit) refuse(err error) { m.answer(SeekResult{Seek: m.Seek}, err) }

// Seek has the unit's actor on this node move its checkpoint (see the
// section comment). reply is called once, from some goroutine: with the
// result, or with an error wrapping brokers.ErrBadSeek (the target or the
// source is wrong for a seek), ErrNotOwned, ErrSeekConflict,
// persistence.ErrLeaseLost or the broker's or store's error. Safe from any
// goroutine.
func (n *Node) Seek(s Seek, reply func(SeekResult, error)) {
	m := &seekUnit{Seek: s, reply: reply}
	t, err := brokers.ParseSeekTarget(s.To)
	if err != nil {
		m.refuse(fmt.Errorf("seek %s: %w", s.Unit, err))
		return
	}
	m.target = t
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		m.refuse(fmt.Errorf("seek %s: %w: node %s is closed", s.Unit, ErrNotOwned, n.Name()))
		return
	}
	n.node.system.Root.Send(n.root, m)
}

// routeSeek hands a seek to the supervisor of its unit's source.
func (a *nodeActor) routeSeek(ctx actor.Context, m *seekUnit) {
	for _, s := range a.specs {
		if !strings.HasPrefix(m.Unit, s.Name+"/") {
			continue
		}
		pid := a.sups[s.Name]
		switch {
		case s.isQueue():
			m.refuse(fmt.Errorf("seek %s: %w: source %s is a queue (%s); only stream units have a checkpoint to move", m.Unit, brokers.ErrBadSeek, s.Name, s.Type))
		case pid == nil || a.down[s.Name] || a.draining:
			m.refuse(fmt.Errorf("seek %s: %w: source %s runs no units on node %s now (restarting or draining)", m.Unit, ErrNotOwned, s.Name, a.shared.env.Node))
		default:
			ctx.Send(pid, m)
		}
		return
	}
	m.refuse(fmt.Errorf("seek %s: %w: node %s has no source of that unit", m.Unit, brokers.ErrBadSeek, a.shared.env.Node))
}

// onSeek hands a seek to the unit's actor; a passive unit is activated
// for it.
func (s *supervisor) onSeek(ctx actor.Context, m *seekUnit) {
	c := s.children[m.Unit]
	node := s.node.env.Node
	switch {
	case c == nil:
		m.refuse(fmt.Errorf("seek %s: %w: node %s does not run it", m.Unit, ErrNotOwned, node))
	case c.waiting:
		m.refuse(fmt.Errorf("seek %s: %w: it failed and waits to restart on node %s", m.Unit, ErrSeekConflict, node))
	case c.stopping || s.draining:
		m.refuse(fmt.Errorf("seek %s: %w: it is being handed over by node %s; ask its next owner", m.Unit, ErrSeekConflict, node))
	case c.passive != nil:
		c.passive.seek = m
		s.activate(ctx, c, resumeSeek)
	case c.pid == nil:
		m.refuse(fmt.Errorf("seek %s: %w: it has no actor on node %s now", m.Unit, ErrSeekConflict, node))
	default:
		ctx.Send(c.pid, m)
	}
}

// requestSeek takes a seek for this unit: refused when the unit cannot
// seek, else pending until the main line is free (seekIfIdle).
func (u *unitActor) requestSeek(ctx actor.Context, m *seekUnit) {
	if u.joinSeek(m) {
		return
	}
	var why string
	switch {
	case u.spec.isQueue():
		m.refuse(fmt.Errorf("seek %s: %w: source %s is a queue", u.id, brokers.ErrBadSeek, u.spec.Name))
		return
	case u.seek != nil:
		why = "another seek (to " + u.seek.To + ") is in progress"
	case u.phase.stopping():
		why = "it is stopping; ask its next owner"
	case !u.holdsLease || u.phase == phaseStarting || u.phase == phaseAcquiring:
		why = "it holds no lease yet (" + u.phase.String() + ")"
	}
	if why != "" {
		m.refuse(fmt.Errorf("seek %s: %w: %s", u.id, ErrSeekConflict, why))
		return
	}
	u.seek = m
	u.node.env.trace("seek-asked", u.id, m.To)
	u.seekIfIdle(ctx)
}

// seekIfIdle starts the pending seek when no main-line job is in flight;
// a fetch in flight is cancelled, and its result starts the seek (onFetch).
// An apply or an open in flight starts it when it ends (next, fetch,
// fail).
func (u *unitActor) seekIfIdle(ctx actor.Context) {
	switch {
	case !u.seekPending():
	case u.cancelFetch != nil:
		u.cancelFetch()
	case u.inflight == 0:
		u.startSeek(ctx)
	}
}

// seekPending: a seek waits for the main line.
func (u *unitActor) seekPending() bool { return u.seek != nil && !u.seek.started }

// startSeek drops what the unit holds and fetched ahead, closes the
// reader and runs the seek job.
func (u *unitActor) startSeek(ctx actor.Context) {
	m := u.seek
	m.started = true
	u.cancelFetch = nil
	u.cancelWake()
	if u.retryTimer != nil {
		u.retryTimer.Stop()
		u.retryTimer = nil
	}
	if kept := u.ahead.result; kept != nil && mutate.On(mutate.SeekKeepsAhead) {
		// the bug: the batch fetched ahead of the old position survives
		u.ahead.result = nil
		u.dropAhead()
		u.ahead.result = kept
	} else {
		u.dropAhead()
	}
	u.ahead.reopened = false // the seek opens a reader of its own
	u.held = nil             // a stream batch that failed: the new checkpoint says what is read
	u.closeConn()
	j := seekJob{store: u.node.env.Store, spec: u.spec, part: u.part.ID, unit: u.id, lease: u.lease, target: m.target,
		id: m.ID, bad: m.bad, from: u.checkpoint, to: m.To, by: m.By, reason: m.Reason,
		expiry: u.node.tuning.SeekExpiry}
	u.runMainJob(ctx, "seek", j.run)
}

// seekJob resolves a target, opens a reader there and writes the
// checkpoint by a fenced reset.
type seekJob struct {
	store  persistence.Store
	spec   *SourceSpec
	part   string
	unit   string
	lease  persistence.Lease
	target brokers.SeekTarget
	// id is the control row's seek id (0: none), marked done with the
	// checkpoint; bad a target that did not parse; the rest for the
	// audit entry of a seek with an id.
	id                   int64
	bad                  error
	from, to, by, reason string
	// expiry: a seek with an id that had waited longer when checkRow
	// read its row (by the store's clock) is not carried out.
	expiry time.Duration
}

type seekResult struct {
	conn     *brokerConn
	position string
	err      error
	// marked: the seek was refused and its id marked done; already: its
	// id was done before it ran (nothing written).
	marked, already bool
}

func (j seekJob) run(c context.Context) any {
	if j.bad != nil {
		return j.markDone(c, seekResult{err: fmt.Errorf("%w: %w", brokers.ErrBadSeek, j.bad)}, "refused")
	}
	if j.id != 0 {
		if r, ok := j.checkRow(c); !ok {
			return r
		}
	}
	// The stream's incarnation first, as a start is recorded (record):
	// the seek's checkpoint belongs to the stream as it is now — after a
	// recreation, to the new one — and must say so, or the next open
	// would refuse it as a position of the old stream.
	id, err := streamID(c, j.spec.Stream, j.part)
	if err != nil {
		return seekResult{err: fmt.Errorf("identify the stream of partition %s: %w", j.part, err)}
	}
	st, err := brokers.SeekStart(c, j.spec.Stream, j.part, j.target)
	if err != nil {
		r := seekResult{err: fmt.Errorf("resolve %s on partition %s: %w", j.target, j.part, err)}
		if errors.Is(err, brokers.ErrBadSeek) {
			r = j.markDone(c, r, "refused")
		}
		return r
	}
	pos := brokers.StartPosition(st)
	st.StreamID = id
	rd, err := j.spec.Stream.Open(c, j.part, st)
	if err != nil {
		if positionInvalid(err) {
			err = fmt.Errorf("%w: %w", brokers.ErrBadSeek, err)
			return j.markDone(c, seekResult{err: fmt.Errorf("open partition %s at %s: %w", j.part, pos, err)}, "refused")
		}
		return seekResult{err: fmt.Errorf("open partition %s at %s: %w", j.part, pos, err)}
	}
	b := &persistence.Batch{Source: j.spec.Name, Unit: j.unit, Lease: j.lease, Checkpoint: pos, Reset: true, StreamID: id}
	if !mutate.On(mutate.SeekNeverDone) {
		b.SeekDone = j.id
	}
	if _, err := j.store.Apply(c, b); err != nil {
		_ = rd.Close()
		if errors.Is(err, persistence.ErrSeekDone) {
			return seekResult{already: true} // expired (or done) since checkRow
		}
		return seekResult{err: fmt.Errorf("write checkpoint %s: %w", pos, err)}
	}
	if j.id != 0 {
		j.audit(c, fmt.Sprintf("id=%d to=%s from=%s position=%s token=%d", j.id, j.to, j.from, pos, j.lease.Token))
	}
	return seekResult{conn: &brokerConn{reader: rd}, position: pos}
}

func (u *unitActor) onSeek(ctx actor.Context, r seekResult) {
	m := u.seek
	u.seek = nil
	if m.ID != 0 {
		defer u.afterRowSeek(ctx, r)
	}
	if r.already {
		u.node.controls.seekMarked(u.id, m.ID)
		u.node.env.trace("seek-already-done", u.id, m.To)
		// done means carried out, or overtaken by a later seek of the
		// row (only the newest is carried out): last_seek says which
		m.refuse(fmt.Errorf("seek %s: %w: seek %d (to %s) was carried out already or overtaken by a later seek of the unit (see last_seek in the tree)", u.id, ErrSeekConflict, m.ID, m.To))
		u.open(ctx)
		return
	}
	if r.err != nil {
		err := fmt.Errorf("seek %s to %s: %w", u.id, m.To, r.err)
		if r.marked {
			// refused for good: not tried again; the tree says why
			u.node.controls.seekMarked(u.id, m.ID)
			now := u.now()
			last := &SeekStatus{To: m.To, From: u.checkpoint, Position: u.checkpoint, At: now, By: m.By, Reason: m.Reason,
				ID: m.ID, Token: u.lease.Token, Error: r.err.Error()}
			u.status(func(s *treeUnit) { s.setLastSeek(last); s.setError(err.Error(), now) })
			u.lastSeek = &seekOutcome{res: SeekResult{Seek: m.Seek}, err: err}
		}
		u.node.env.trace("seek-failed", u.id, r.err.Error())
		u.node.env.logger().Warn("seek failed; the checkpoint is unchanged", "unit", u.id, "to", m.To, "by", m.By, "error", r.err)
		m.refuse(err)
		if errors.Is(r.err, persistence.ErrLeaseLost) {
			u.leaseLost(ctx, "seek")
			return
		}
		u.open(ctx) // the reader was closed: open it again at the checkpoint
		return
	}
	now, from := u.now(), u.checkpoint
	res := SeekResult{Seek: m.Seek, Node: u.node.env.Node, From: from, Position: r.position, Token: u.lease.Token, At: now}
	if m.ID != 0 {
		u.node.controls.seekMarked(u.id, m.ID)
		u.lastSeek = &seekOutcome{res: res}
	}
	u.conn = r.conn
	u.setCheckpoint(r.position)
	u.justReset, u.resetCause, u.failures, u.recovering = false, nil, 0, false
	last := &SeekStatus{To: m.To, From: from, Position: r.position, At: now, By: m.By, Reason: m.Reason, ID: m.ID, Token: res.Token}
	u.status(func(s *treeUnit) { s.setLastSeek(last) })
	u.node.env.trace("seek", u.id, from+" -> "+r.position)
	u.node.env.logger().Info("unit sought: its checkpoint was moved by a fenced write", "unit", u.id, "to", m.To,
		"from", from, "position", r.position, "token", res.Token, "by", m.By, "reason", m.Reason)
	m.answer(res, nil)
	if p := brokers.Applied(r.position); p != "" {
		u.commitToBroker(ctx, p)
	}
	if u.phase == phaseRetrying {
		u.becomeRunning()
	}
	u.next(ctx) // reads from the new reader (phase stopping: ends the stop)
}

// afterRowSeek follows a seek with an id: one that failed and was not
// marked done is told again at the next read of the table; otherwise a
// newer seek of the row the view shows is picked up now (tell-once told
// it while this one ran).
func (u *unitActor) afterRowSeek(ctx actor.Context, r seekResult) {
	if r.err != nil && !r.marked {
		u.node.controls.retell(u.id)
		return
	}
	if u.seek == nil && !u.phase.stopping() {
		u.pickUpSeek(ctx)
	}
}

// endSeek answers a seek the unit will not finish (its actor ends).
func (u *unitActor) endSeek() {
	m := u.seek
	if m == nil {
		return
	}
	u.seek = nil
	if m.started {
		m.refuse(fmt.Errorf("seek %s: %w: the unit stopped before the seek finished (its checkpoint may have moved; see the tree)", u.id, ErrSeekConflict))
		return
	}
	m.refuse(fmt.Errorf("seek %s: %w: the unit stopped before the seek ran", u.id, ErrSeekConflict))
}
