package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// seekWait bounds how long a seek asked of this node's unit waits for its
// answer when the request has no deadline of its own: the unit finishes
// the batch in flight first.
const seekWait = 30 * time.Second

// SeekRecord is the result of a seek carried out: what the controls table
// (seek_done_id) and the audit table record. It is ControlReply.Result.
type SeekRecord struct {
	ID       int64     `json:"id,omitempty"`
	Unit     string    `json:"unit"`
	To       string    `json:"to"`
	From     string    `json:"from"`
	Position string    `json:"position"`
	Token    int64     `json:"token"`
	Node     string    `json:"node"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// controlSeek carries out drover seek: it checks the unit is one of a
// stream source's and the target parses, then writes the seek to the
// unit's control row (seek_id one up, the target; an audit entry) in one
// transaction. When this node holds the unit's lease its actor seeks at
// once with the row's id (seekLocal), and the reply says what moved;
// else the owner picks the row up at its next renewal round and carries
// it out under its lease (actors: unit_seekrow.go), and the reply says
// so. Either way the row is marked done in the seek's fenced transaction,
// so it is carried out once.
func (n *Node) controlSeek(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	unit, err := n.seekUnit(ctx, req)
	if err != nil {
		return debug.ControlReply{}, err
	}
	target, err := brokers.ParseSeekTarget(req.To)
	if err != nil {
		return debug.ControlReply{}, fmt.Errorf("%w: %w", debug.ErrBadControl, err)
	}
	source := unit[:strings.LastIndex(unit, "/")]
	// refused here, not at the owner: a row it would only refuse later
	n.mu.Lock()
	stream := n.sources[source].Stream
	n.mu.Unlock()
	if err := brokers.CheckSubPosition(stream, unit[len(source)+1:], target); err != nil {
		return debug.ControlReply{}, fmt.Errorf("%w: %w", debug.ErrBadControl, err)
	}
	owner, err := n.unitOwner(ctx, unit)
	if err != nil {
		return debug.ControlReply{}, err
	}
	row, err := n.store.SetControl(ctx, persistence.ControlChange{Source: source, Unit: unit, Seek: req.To, Node: n.cfg.Node.Name,
		Action: debug.ActionSeek, Args: "to=" + req.To, By: req.By, Reason: req.Reason})
	if err != nil {
		return debug.ControlReply{}, fmt.Errorf("seek %s: write its control row: %w", unit, err)
	}
	n.log.Info("control", "action", debug.ActionSeek, "target", unit, "to", req.To, "id", row.SeekID, "owner", owner, "by", req.By, "reason", req.Reason)
	if owner != n.cfg.Node.Name {
		return n.seekAsked(ctx, unit, owner, row), nil
	}
	rec, err := n.seekLocal(ctx, actors.Seek{Unit: unit, To: req.To, ID: row.SeekID, By: req.By, Reason: req.Reason})
	if errors.Is(err, debug.ErrControlConflict) {
		// the unit could not seek now (moving, restarting): the row
		// stays pending for whoever holds it next
		n.log.Warn("seek asked; the unit could not carry it out at once", "unit", unit, "error", err)
		return n.seekAsked(ctx, unit, "", row), nil
	}
	if err != nil && !n.seekDone(ctx, unit, row.SeekID) {
		// Not carried out, and not marked done (a refused seek is):
		// the row stays pending and the unit picks it up again at a
		// renewal round. Saying "failed" would have the operator ask
		// again, and the range applied twice.
		n.log.Warn("seek asked; its first try failed, the owner tries again", "unit", unit, "error", err)
		rep := n.seekAsked(ctx, unit, owner, row)
		rep.Detail = fmt.Sprintf("%s (its first try failed: %v)", rep.Detail, err)
		return rep, nil
	}
	if err != nil {
		return debug.ControlReply{}, err
	}
	return debug.ControlReply{
		Action: debug.ActionSeek, Node: rec.Node, Result: rec,
		Detail: fmt.Sprintf("%s sought to %s: checkpoint %s -> %s (lease token %d); what follows it is applied (again)", unit, req.To, rec.From, rec.Position, rec.Token),
	}, nil
}

// seekDone reports whether the store marks seek id of unit done (carried
// out or refused for good); a store that cannot say counts as not done.
func (n *Node) seekDone(ctx context.Context, unit string, id int64) bool {
	cs, err := n.store.ListControls(ctx)
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Unit == unit {
			return c.SeekDoneID >= id
		}
	}
	return false
}

// seekAsked is the reply to a seek left to the unit's owner's pickup of
// its control row; the controls table is applied on this node at once.
func (n *Node) seekAsked(ctx context.Context, unit, owner string, row persistence.Control) debug.ControlReply {
	if cs, err := n.store.ListControls(ctx); err == nil {
		n.actors.SetControls(cs)
	}
	who := "its owner"
	if owner != "" {
		who = "the owner " + owner
	}
	return debug.ControlReply{Action: debug.ActionSeek, Node: owner, Result: controlRow(row),
		Detail: fmt.Sprintf("%s: seek %d to %s asked; %s carries it out within a renewal round, under its lease; see last_seek in the tree (not carried out within %s, node.seek_expiry, it expires and never runs)",
			unit, row.SeekID, row.Seek, who, n.actorsTuning().SeekExpiry)}
}

// actorsTuning is the tuning this node's actors run with.
func (n *Node) actorsTuning() actors.Tuning { return tuning(n.opt.Tuning, n.cfg) }

// seekUnit checks a seek's target names a unit of a stream source of this
// node's configuration, and returns its id.
func (n *Node) seekUnit(ctx context.Context, req debug.ControlRequest) (string, error) {
	unit, src := strings.TrimSpace(req.Unit), strings.TrimSpace(req.Source)
	if unit == "" {
		return "", fmt.Errorf("%w: seek takes one unit (orders/3), not a whole source", debug.ErrBadControl)
	}
	if src == "" {
		src, _, _ = strings.Cut(unit, "/")
	}
	if !strings.HasPrefix(unit, src+"/") {
		unit = src + "/" + unit // the partition alone
	}
	var names []string
	for _, s := range n.runningSources() {
		names = append(names, s.Name)
		if s.Name != src {
			continue
		}
		n.mu.Lock()
		stream := n.sources[s.Name].Stream
		n.mu.Unlock()
		if stream == nil {
			return "", fmt.Errorf("%w: source %s is a %s queue: only stream units have a checkpoint to move (a Pub/Sub subscription has a seek of its own, which drover does not drive)", debug.ErrBadControl, src, s.Type)
		}
		parts, err := stream.Partitions(ctx)
		if err != nil {
			return "", fmt.Errorf("seek %s: list the partitions of %s: %w", unit, src, err)
		}
		part := strings.TrimPrefix(unit, src+"/")
		if !slices.ContainsFunc(parts, func(p brokers.Partition) bool { return p.ID == part }) {
			ids := make([]string, 0, len(parts))
			for _, p := range parts {
				ids = append(ids, p.ID)
			}
			return "", fmt.Errorf("%w: source %s has no partition %q (it lists %s)", debug.ErrBadControl, src, part, strings.Join(ids, ", "))
		}
		return unit, nil
	}
	return "", fmt.Errorf("%w: no source %q in this node's configuration (sources: %s)", debug.ErrBadControl, src, strings.Join(names, ", "))
}

// unitOwner is the node that holds unit's lease in the store ("" when
// none does).
func (n *Node) unitOwner(ctx context.Context, unit string) (string, error) {
	ls, err := n.store.List(ctx)
	if err != nil {
		return "", fmt.Errorf("seek %s: list leases: %w", unit, err)
	}
	for _, l := range ls {
		if l.Unit == unit {
			return l.Owner, nil
		}
	}
	return "", nil
}

// seekLocal has this node's actor of s.Unit seek and waits for it. It is
// the one path a seek takes on its owner: the controls table's pending
// seek, picked up by the owner, is a call of it with the row's seek id.
func (n *Node) seekLocal(ctx context.Context, s actors.Seek) (SeekRecord, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, seekWait)
		defer cancel()
	}
	type answer struct {
		r   actors.SeekResult
		err error
	}
	ch := make(chan answer, 1)
	n.actors.Seek(s, func(r actors.SeekResult, err error) { ch <- answer{r, err} })
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return SeekRecord{}, fmt.Errorf("seek %s: no answer from the unit: %w (it may still carry the seek out: see last_seek in the tree)", s.Unit, ctx.Err())
	}
	switch {
	case errors.Is(a.err, brokers.ErrBadSeek):
		return SeekRecord{}, fmt.Errorf("%w: %w", debug.ErrBadControl, a.err)
	case errors.Is(a.err, actors.ErrNotOwned), errors.Is(a.err, actors.ErrSeekConflict), errors.Is(a.err, persistence.ErrLeaseLost):
		return SeekRecord{}, fmt.Errorf("%w: %w", debug.ErrControlConflict, a.err)
	case a.err != nil:
		return SeekRecord{}, a.err
	}
	r := a.r
	return SeekRecord{ID: r.ID, Unit: r.Unit, To: r.To, From: r.From, Position: r.Position, Token: r.Token,
		Node: r.Node, By: r.By, Reason: r.Reason, At: r.At}, nil
}
