package actors

import (
	"context"
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
)

// committer is the node's group committer: units whose batch is ready at
// the same moment share store round trips (persistence.GroupApplier).
//
// Classic group commit, with no timer: a batch that arrives while fewer
// groups are in flight than the store applies in parallel
// (persistence.ParallelGroups: PostgreSQL's pool size; 1 for SQLite and
// memory) goes at once, alone (a plain Apply, under its unit's context,
// exactly the call the unit would have made itself); batches that arrive
// while that many are in flight queue, and when one completes they all go
// as the next group (at most maxGroupBatches batches or maxGroupBytes
// bytes; the rest wait for the group after it). Under light load nothing
// waits; under load the queue fills while the store works, so the groups
// grow with the load and a batch waits at most for the groups before it.
// Several groups in flight keep a store that works in parallel busy and
// keep the units from moving in one convoy (all waiting for one group,
// then all fetching while the store idles).
//
// Each unit gets its result back as it gets that of its own apply job (a
// jobDone of its incarnation, holding its applyResult); a unit whose
// incarnation ended meanwhile gets nothing, as with its own jobs. The
// unit's accounting is unchanged: the batch it handed over is its one
// main-line job in flight until the result comes back. A unit has at most
// one batch in the committer.
//
// The store call runs as a job on the node's executor, like every store
// call, so the testkit's executor decides when it runs and when its
// result arrives: deterministic under a seed. A group's batches are
// fenced, refused and deduplicated one by one by the store
// (GroupApplier): one unit's lost lease or refused record is that unit's
// applyResult only.
type committer struct {
	node     *nodeEnv
	group    persistence.GroupApplier
	queue    []*commitItem
	inflight int // groups in the store now
	limit    int // groups in flight at most (persistence.ParallelGroups)
}

// Bounds of one group.
const (
	maxGroupBatches = 64
	maxGroupBytes   = 8 << 20 // persistence.Op.Size summed over the group's batches
)

// commitItem is one unit's batch handed to the committer.
type commitItem struct {
	batch *persistence.Batch
	// result makes the unit's job result of the store's answer.
	result func(persistence.Applied, error) any
	unit   *actor.PID
	inc    *incarnation
}

// messages
type (
	// commitBatch hands a batch to the committer.
	commitBatch struct{ item *commitItem }
	// groupApplied is the result of a group's store call.
	groupApplied struct {
		items   []*commitItem
		results []persistence.GroupResult
	}
)

// groupCommits reports whether the node's applies go through its
// committer: the store can apply groups and the node does not say
// otherwise (Env.ApplyAlone, node.group_commit: false).
func groupCommits(env *Env) (persistence.GroupApplier, bool) {
	if env.ApplyAlone {
		return nil, false
	}
	g, ok := env.Store.(persistence.GroupApplier)
	return g, ok
}

func newCommitter(node *nodeEnv, g persistence.GroupApplier) *committer {
	limit := 1
	if p, ok := g.(persistence.ParallelGroups); ok {
		limit = max(1, p.ParallelGroups())
	}
	return &committer{node: node, group: g, limit: limit}
}

func (c *committer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *commitBatch:
		c.queue = append(c.queue, m.item)
		if c.inflight < c.limit {
			c.sendAll(ctx)
			return
		}
		if c.node.env.Trace != nil {
			c.node.env.trace("group-queued", m.item.batch.Unit, strconv.Itoa(len(c.queue)))
		}
	case *groupApplied:
		c.inflight--
		root := ctx.ActorSystem().Root
		for i, it := range m.items {
			if it.inc.ended.Load() {
				continue // as runSideJob: the unit no longer cares
			}
			r := m.results[i]
			root.Send(it.unit, &jobDone{incarnation: it.inc, v: it.result(r.Applied, r.Err)})
		}
		c.sendAll(ctx)
	}
}

// sendAll sends what is queued, in groups, while fewer groups than the
// limit are in flight.
func (c *committer) sendAll(ctx actor.Context) {
	for len(c.queue) > 0 && c.inflight < c.limit {
		c.send(ctx)
	}
}

// send starts the next group with the batches queued: those of ended
// incarnations are dropped (nobody waits for them), at most
// maxGroupBatches or maxGroupBytes go, the first one whatever its size.
func (c *committer) send(ctx actor.Context) {
	var items []*commitItem
	bytes, n := 0, 0
	for _, it := range c.queue {
		n++
		if it.inc.ended.Load() {
			continue
		}
		size := batchBytes(it.batch)
		if len(items) > 0 && bytes+size > maxGroupBytes {
			n--
			break
		}
		items = append(items, it)
		bytes += size
		if len(items) == maxGroupBatches {
			break
		}
	}
	c.queue = append(c.queue[:0], c.queue[n:]...)
	if len(items) == 0 {
		return
	}
	c.inflight++
	self, root := ctx.Self(), ctx.ActorSystem().Root
	deliver := func(v any) { root.Send(self, v) }
	if len(items) == 1 {
		// A group of one: the unit's own Apply, under its incarnation.
		it, store := items[0], c.node.env.Store
		it.inc.goJob(c.node.env.Executor, "apply", func(ctx context.Context) any {
			a, err := store.Apply(ctx, it.batch)
			return &groupApplied{items: items, results: []persistence.GroupResult{{Applied: a, Err: err}}}
		}, deliver)
		return
	}
	bs := make([]*persistence.Batch, len(items))
	for i, it := range items {
		bs[i] = it.batch
	}
	g := c.group
	if c.node.env.Trace != nil {
		c.node.env.trace("group-commit", c.node.env.Node, fmt.Sprintf("batches=%d bytes=%d", len(bs), bytes))
	}
	c.node.env.Executor.Go(exec.WithLabel(c.node.ctx, "apply"), func(ctx context.Context) any {
		rs := g.ApplyGroup(ctx, bs)
		if len(rs) != len(bs) {
			// a store bug; every batch's outcome is unknown
			err := fmt.Errorf("apply group: the store answered %d results for %d batches", len(rs), len(bs))
			rs = make([]persistence.GroupResult, len(bs))
			for i := range rs {
				rs[i].Err = err
			}
		}
		return &groupApplied{items: items, results: rs}
	}, deliver)
}

// batchBytes is what a batch carries to the store (persistence.Op.Size).
func batchBytes(b *persistence.Batch) int {
	n := 0
	for i := range b.Ops {
		n += b.Ops[i].Size()
	}
	return n
}

// storeApply applies the unit's batch: through the node's committer when
// it has one, else in a job of its own. result makes the unit's job
// result of the store's answer. Either way it is one main-line job of the
// unit (inflight), whose result comes back as a jobDone.
//
// A handler's batch (Handle set) always goes alone: the user's code may
// take long (a call out, a pause), and in the committer it would hold up
// every batch queued behind its group — on SQLite and memory, whose limit
// is one group in flight, every other unit of the node — for as long.
func (u *unitActor) storeApply(ctx actor.Context, b *persistence.Batch, result func(persistence.Applied, error) any) {
	if u.node.committer == nil || b.Handle != nil {
		store := u.node.env.Store
		u.runMainJob(ctx, "apply", func(c context.Context) any {
			a, err := store.Apply(c, b)
			return result(a, err)
		})
		return
	}
	u.inflight++
	ctx.Send(u.node.committer, &commitBatch{item: &commitItem{batch: b, result: result, unit: ctx.Self(), inc: u.incarnation}})
}
