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
// stream source's, finds who holds its lease and, when this node does, has
// the unit seek (seekLocal). A unit another node holds is answered with
// ErrControlConflict naming that node and its debug address (a seek is
// carried out by the owner, under its token; the controls table, where
// the owner picks the seek up, forwards it at merge).
func (n *Node) controlSeek(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	unit, err := n.seekUnit(ctx, req)
	if err != nil {
		return debug.ControlReply{}, err
	}
	if _, err := brokers.ParseSeekTarget(req.To); err != nil {
		return debug.ControlReply{}, fmt.Errorf("%w: %w", debug.ErrBadControl, err)
	}
	if owner, err := n.unitOwner(ctx, unit); err != nil {
		return debug.ControlReply{}, err
	} else if owner != n.cfg.Node.Name {
		return debug.ControlReply{}, n.ownedElsewhere(unit, owner)
	}
	rec, err := n.seekLocal(ctx, actors.Seek{Unit: unit, To: req.To, By: req.By, Reason: req.Reason})
	if err != nil {
		return debug.ControlReply{}, err
	}
	// The seek is done (its checkpoint committed): the audit entry says
	// so; a failure to write it is logged, the seek stands.
	if _, err := n.store.WriteAudit(ctx, persistence.AuditEntry{Node: n.cfg.Node.Name, By: req.By, Action: debug.ActionSeek,
		Source: strings.TrimSuffix(unit[:strings.LastIndex(unit, "/")+1], "/"), Unit: unit,
		Args: fmt.Sprintf("to=%s from=%s position=%s token=%d", req.To, rec.From, rec.Position, rec.Token), Reason: req.Reason}); err != nil {
		n.log.Warn("seek done; its audit entry was not written", "unit", unit, "error", err)
	}
	return debug.ControlReply{
		Action: debug.ActionSeek, Node: rec.Node, Result: rec,
		Detail: fmt.Sprintf("%s sought to %s: checkpoint %s -> %s (lease token %d); what follows it is applied (again)", unit, req.To, rec.From, rec.Position, rec.Token),
	}, nil
}

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

// ownedElsewhere is the conflict of a seek of a unit this node does not
// hold: who does, and where to ask.
func (n *Node) ownedElsewhere(unit, owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: no node holds the lease of %s now; ask again once it is owned", debug.ErrControlConflict, unit)
	}
	where := "its debug address is not known here"
	for _, m := range n.member.Members() {
		if m.Name == owner && m.DebugAddr != "" {
			scheme := "http"
			if m.DebugTLS {
				scheme = "https"
			}
			where = "ask it: drover seek --addr " + scheme + "://" + m.DebugAddr
		}
	}
	return fmt.Errorf("%w: %s is owned by node %s, which carries out its seeks under its lease (%s)", debug.ErrControlConflict, unit, owner, where)
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
