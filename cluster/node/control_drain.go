package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence"
)

// controls is the state of the node-wide controls: drain, undrain, exit
// and reload.
type controls struct {
	// op serializes drain, undrain and reload: one at a time.
	op sync.Mutex

	mu       sync.Mutex
	drained  bool
	stopping bool                 // Shutdown or Close began
	reload   *actors.ReloadStatus // the last reload's outcome
	// applied is the configuration the node runs now (the one it started
	// with, then each reload's); written under op and mu, read under
	// either. Its Sources slice is never changed in place.
	applied *config.Config
	// removing are the source removals a reload began that have not
	// ended (control_reload.go): their units still hand over. Under mu.
	removing map[string]*removal
	// reloadTimeout bounds a reload (defaultReloadTimeout; tests shorten it).
	reloadTimeout time.Duration
	// finishers are the goroutines that end the removals; the node's
	// close waits for them.
	finishers sync.WaitGroup

	exit     chan struct{} // closed when told to exit
	exitOnce sync.Once
	stop     chan struct{} // closed when the node stops
	stopOnce sync.Once
}

func (c *controls) init(cfg *config.Config) {
	c.applied = cfg
	c.removing = map[string]*removal{}
	c.reloadTimeout = defaultReloadTimeout
	c.exit = make(chan struct{})
	c.stop = make(chan struct{})
}

// stopped is called when the node begins to stop: the controls refuse
// from then on, and waits for a control end.
func (c *controls) stopped() {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stop) })
}

func (c *controls) annotate(t *actors.Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Drained = c.drained
	if c.reload != nil {
		r := *c.reload
		t.Reload = &r
	}
}

// ExitRequested is closed when an operator told the node to exit (POST
// /debug/control/exit): its owner then shuts it down as on SIGTERM
// (Shutdown) and exits with status 0.
func (n *Node) ExitRequested() <-chan struct{} { return n.ctl.exit }

// drainWait bounds how long a drain waits for the node's units to stop
// before it answers (they go on stopping after it): under the debug
// endpoint's default write timeout (debug.DefaultFetchTimeout +
// DefaultWriteMargin, 12 s), so that the answer gets out.
const drainWait = 8 * time.Second

// controlDrain carries out drain, undrain and exit. Both drain and undrain
// are idempotent: a drain of a drained node, or an undrain of one that is
// not drained, changes nothing and says so (200). They are refused (409)
// once the node is stopping.
func (n *Node) controlDrain(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	rep := debug.ControlReply{Action: req.Action, Node: n.cfg.Node.Name}
	if req.Source != "" || req.Unit != "" || req.To != "" {
		return rep, fmt.Errorf("%w: %s takes no source, unit or position: it acts on the whole node", debug.ErrBadControl, req.Action)
	}
	if req.Action == debug.ActionExit {
		n.ctl.mu.Lock()
		stopping := n.ctl.stopping
		n.ctl.mu.Unlock()
		if stopping {
			return rep, fmt.Errorf("%w: node %s is already stopping", debug.ErrControlConflict, n.cfg.Node.Name)
		}
		n.log.Info("told to exit: leaving the cluster as on SIGTERM", "by", req.By, "reason", req.Reason)
		n.audit(ctx, req, "")
		n.ctl.exitOnce.Do(func() { close(n.ctl.exit) })
		rep.Detail = "exiting: the node hands its units over, leaves the cluster and exits"
		return rep, nil
	}
	n.ctl.op.Lock()
	defer n.ctl.op.Unlock()
	n.ctl.mu.Lock()
	stopping, drained := n.ctl.stopping, n.ctl.drained
	n.ctl.mu.Unlock()
	if stopping {
		return rep, fmt.Errorf("%w: node %s is stopping", debug.ErrControlConflict, n.cfg.Node.Name)
	}
	if req.Action == debug.ActionUndrain {
		if !drained {
			rep.Detail = "not drained: nothing to do"
			return rep, nil
		}
		if err := n.member.SetState(ctx, placement.StateAlive); err != nil {
			n.log.Warn("announce alive", "error", err) // gossip spreads it anyway
		}
		n.ctl.mu.Lock()
		n.ctl.drained = false
		n.ctl.mu.Unlock()
		n.log.Info("undrained: back in placement", "by", req.By, "reason", req.Reason)
		n.audit(ctx, req, "")
		rep.Detail = "undrained: the node is back in placement and takes units again"
		return rep, nil
	}
	if !drained {
		n.ctl.mu.Lock()
		n.ctl.drained = true
		n.ctl.mu.Unlock()
		n.log.Info("draining: leaving placement", "by", req.By, "reason", req.Reason)
		// placement gives this node nothing once it says "leaving": its
		// supervisors stop their units as on SIGTERM (finish the batch,
		// checkpoint, release the lease) and the others acquire at once
		if err := n.member.SetState(ctx, placement.StateLeaving); err != nil {
			n.log.Warn("announce leaving", "error", err)
		}
		n.audit(ctx, req, "")
	}
	left := n.waitNoUnits(ctx, drainWait)
	rep.Result = map[string]any{"state": string(placement.StateLeaving), "units": left}
	switch {
	case left > 0:
		rep.Detail = fmt.Sprintf("draining: %d units are still stopping (see the tree)", left)
	case drained:
		rep.Detail = "already drained: the node owns no unit (undrain to rejoin, exit to stop)"
	default:
		rep.Detail = "drained: every unit was handed over; the node stays up until undrained or told to exit"
		n.log.Info("drained: every unit handed over")
	}
	return rep, nil
}

// audit writes a node-wide control that was carried out (drain, undrain,
// exit, reload) to the audit table; a failure to write it is logged, the
// control stands.
func (n *Node) audit(ctx context.Context, req debug.ControlRequest, args string) {
	// Args may carry an error of a broker's client: URL secrets masked,
	// as in last_error and the event log.
	if _, err := n.store.WriteAudit(ctx, persistence.AuditEntry{Node: n.cfg.Node.Name, By: req.By, Action: req.Action,
		Args: redact.URL(args), Reason: req.Reason}); err != nil {
		n.log.Warn(req.Action+" done; its audit entry was not written", "error", err)
	}
}

// waitNoUnits waits until this node's tree lists no unit, ctx ends, the
// node stops or max passes, and returns how many units it lists then.
func (n *Node) waitNoUnits(ctx context.Context, max time.Duration) int {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		k := 0
		for _, s := range n.actors.Tree().Sources {
			k += len(s.Units)
		}
		if k == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return k
		case <-n.ctl.stop:
			return k
		case <-deadline.C:
			return k
		case <-tick.C:
		}
	}
}
