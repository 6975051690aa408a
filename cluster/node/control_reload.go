package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
)

// ErrReloadInvalid marks a reload refused because of the file: it does
// not parse or validate (as drover check says), or it changes what cannot
// change on a running node. Nothing was changed.
var ErrReloadInvalid = errors.New("reload refused")

// controlReload carries out drover reload: the reload's outcome; 400
// naming what is wrong with the file; or, for a reload that failed after
// it began to change the node, ErrControlIncomplete with the outcome
// (what was applied, what not, what still stops).
func (n *Node) controlReload(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	rep := debug.ControlReply{Action: req.Action, Node: n.cfg.Node.Name}
	if req.Source != "" || req.Unit != "" || req.To != "" {
		return rep, fmt.Errorf("%w: reload takes no source, unit or position: it re-reads the node's config file", debug.ErrBadControl)
	}
	st, err := n.Reload(ctx)
	switch {
	case errors.Is(err, ErrReloadInvalid):
		return rep, fmt.Errorf("%w: %v", debug.ErrBadControl, err)
	case errors.Is(err, errStopping) && !began(st):
		return rep, fmt.Errorf("%w: %v", debug.ErrControlConflict, err)
	}
	rep.Result = st
	rep.Detail = reloadDetail(st)
	// the reload ran whether or not its caller still waits: so is its
	// audit row written
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n.audit(actx, req, strings.TrimPrefix(rep.Detail, "reloaded: "))
	if err != nil {
		// Part of it may have been applied (sources stopped or started):
		// the reply and the audit say what, and that it failed.
		return rep, fmt.Errorf("%w: %v", debug.ErrControlIncomplete, err)
	}
	return rep, nil
}

var errStopping = errors.New("the node is stopping")

// errStillStopping: a source's removal began and had not ended when the
// reload's time was up.
var errStillStopping = errors.New("still stopping")

// defaultReloadTimeout bounds a reload: opening the new clients and
// handing the removed and changed sources' units over. It is under the
// debug endpoint's debug.DefaultControlTimeout, so that drover reload
// gets its answer.
const defaultReloadTimeout = 2 * time.Minute

// began reports whether a reload changed or began to change the node.
func began(st actors.ReloadStatus) bool {
	return len(st.Added)+len(st.Removed)+len(st.Changed)+len(st.NotApplied)+len(st.Stopping) > 0
}

// reloadDetail says what a reload did for a person (the reply's detail
// and the audit's args): actors.ReloadStatus.Summary.
func reloadDetail(st actors.ReloadStatus) string { return st.Summary() }

// Reload reads the node's config file again (Options.ConfigPath), checks
// it as drover check does (config.Load), and applies the difference to the
// running node: added sources start, removed ones hand their units over
// (finish the batch, checkpoint, release the lease) and stop, changed ones
// do both, the new settings and a new broker client replacing the old;
// the others are not touched. A file that does not load, or that changes
// anything but sources (config.Compare), or whose new clients cannot be
// opened, changes nothing: the error wraps ErrReloadInvalid and names the
// fields.
//
// Once it began to change the node a reload is not rolled back (undoing a
// removal would hand the units over once more): what fails is reported in
// the status (NotApplied, Stopping, Error) and the rest goes on. A removal
// whose units have not handed over within the reload's time goes on: the
// source stays stopping (tree and status), the node no longer counts it as
// running (a later file that keeps it starts it again), its removal ends
// by itself, and the next reload waits for it first. Every outcome is
// logged and shown in the tree (reload). One reload runs at a time.
func (n *Node) Reload(ctx context.Context) (actors.ReloadStatus, error) {
	n.ctl.op.Lock()
	defer n.ctl.op.Unlock()
	// A caller that gives up (a CLI timeout) does not cut a reload short
	// half-way: it runs to its end, within the reload timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.ctl.reloadTimeout)
	defer cancel()
	st, err := n.reload(ctx)
	st.At = time.Now().UTC()
	st.OK = err == nil
	if err != nil {
		st.Error = err.Error()
	}
	n.ctl.mu.Lock()
	settle(&st, n.ctl.removing) // removals that ended since
	n.ctl.reload = &st
	n.ctl.mu.Unlock()
	if err != nil {
		n.log.Error("reload", "config", n.opt.ConfigPath, "error", err, "added", st.Added, "removed", st.Removed,
			"changed", st.Changed, "not_applied", st.NotApplied, "stopping", st.Stopping)
	} else {
		n.log.Info("reloaded", "config", n.opt.ConfigPath, "added", st.Added, "removed", st.Removed, "changed", st.Changed)
	}
	return st, err
}

func (n *Node) reload(ctx context.Context) (actors.ReloadStatus, error) {
	var st actors.ReloadStatus
	n.ctl.mu.Lock()
	stopping := n.ctl.stopping
	// removals an earlier reload began: this one waits for them
	earlier := maps.Clone(n.ctl.removing)
	n.ctl.mu.Unlock()
	if stopping {
		return st, errStopping
	}
	path := n.opt.ConfigPath
	if path == "" {
		return st, fmt.Errorf("%w: the node was not started from a config file", ErrReloadInvalid)
	}
	next, err := config.Load(path)
	if err != nil {
		return st, fmt.Errorf("%w: %s:\n%w", ErrReloadInvalid, path, err)
	}
	for _, w := range next.Warnings() {
		n.log.Warn("reload: config warning", "config", path, "warning", w)
	}
	old := n.ctl.applied
	// whatever the outcome, the registry clients no running source uses
	// (opened for a reload that failed, or replaced) are let go
	defer func() { n.keepRegistries(n.runningSources()) }()
	d, err := config.Compare(old, next)
	if err != nil {
		return st, fmt.Errorf("%w: %s:\n%w", ErrReloadInvalid, path, err)
	}
	// Open every new broker client first: one that cannot be opened (a
	// handler that is not registered, a bad endpoint) changes nothing.
	starting := slices.Concat(d.Changed, d.Added)
	opened := map[string]openedSource{}
	for _, name := range starting {
		i := slices.IndexFunc(next.Sources, func(s config.Source) bool { return s.Name == name })
		spec, src, err := n.openSource(ctx, i, next.Sources[i], n.opt)
		if err != nil {
			for _, o := range opened {
				closeSource(o.src)
			}
			return st, fmt.Errorf("%w: %s:\n%w", ErrReloadInvalid, path, err)
		}
		opened[name] = openedSource{spec: spec, src: src}
	}
	// From here on the node changes: what fails is reported, the rest
	// goes on, and the applied configuration says what runs.
	applied := *old
	applied.Sources = slices.Clone(old.Sources)
	var errs []error
	failed := func(name string, err error) {
		errs = append(errs, err)
		st.NotApplied = append(st.NotApplied, name)
		if errors.Is(err, errStillStopping) {
			st.Stopping = append(st.Stopping, name)
		}
		if o, ok := opened[name]; ok {
			closeSource(o.src)
			delete(opened, name)
		}
	}
	for _, name := range slices.Concat(d.Removed, d.Changed) {
		changed := slices.Contains(d.Changed, name)
		err := n.stopSource(ctx, name, changed)
		if err == nil || errors.Is(err, errStillStopping) {
			// its removal began: it no longer runs as configured
			applied.Sources = slices.DeleteFunc(applied.Sources, func(s config.Source) bool { return s.Name == name })
		}
		switch {
		case err == nil && !changed:
			st.Removed = append(st.Removed, name)
		case errors.Is(err, errStillStopping) && !changed:
			// removed, but not ended: not "not applied"
			errs = append(errs, err)
			st.Stopping = append(st.Stopping, name)
		case err != nil:
			failed(name, err)
		}
	}
	for _, name := range starting {
		o, ok := opened[name]
		if !ok {
			continue
		}
		if r := earlier[name]; r != nil {
			// the same name's removal by an earlier reload must end first
			if err := n.waitRemoval(ctx, r); err != nil {
				failed(name, err)
				continue
			}
		}
		if err := n.startSource(name, o); err != nil {
			failed(name, err)
			continue
		}
		s, _ := next.SourceByName(name)
		applied.Sources = append(applied.Sources, s)
		if slices.Contains(d.Changed, name) {
			st.Changed = append(st.Changed, name)
		} else {
			st.Added = append(st.Added, name)
		}
	}
	// the other removals earlier reloads began: ended now, or still going
	for _, name := range slices.Sorted(maps.Keys(earlier)) {
		if slices.Contains(starting, name) {
			continue
		}
		if err := n.waitRemoval(ctx, earlier[name]); err != nil {
			errs = append(errs, err)
			if errors.Is(err, errStillStopping) {
				st.Stopping = append(st.Stopping, name)
			}
			continue
		}
		st.Removed = append(st.Removed, name)
	}
	n.ctl.mu.Lock()
	n.ctl.applied = &applied
	n.ctl.mu.Unlock()
	return st, errors.Join(errs...)
}

// removal is a source removal a reload began: done is closed when it
// ended, err then says how (nil: the supervisor stopped, the client is
// closed).
type removal struct {
	name  string
	since time.Time
	done  chan struct{}
	err   error
}

// settle moves the sources of st.Stopping whose removal has ended well
// (they are no longer in removing) to Removed, unless their change was not
// applied (a changed source: its new settings start at the next reload).
// Under ctl.mu.
func settle(st *actors.ReloadStatus, removing map[string]*removal) {
	st.Stopping = slices.DeleteFunc(slices.Clone(st.Stopping), func(name string) bool {
		if removing[name] != nil {
			return false
		}
		if !slices.Contains(st.NotApplied, name) && !slices.Contains(st.Removed, name) {
			st.Removed = append(slices.Clone(st.Removed), name)
		}
		return true
	})
	if len(st.Stopping) == 0 {
		st.Stopping = nil
	}
}

// runningSources are the sources the node runs now: those it started
// with, as the reloads since changed them (a reload that failed half-way
// included).
func (n *Node) runningSources() []config.Source {
	n.ctl.mu.Lock()
	defer n.ctl.mu.Unlock()
	return n.ctl.applied.Sources
}

type openedSource struct {
	spec actors.SourceSpec
	src  Source
}

// stopSource removes a running source: its units hand over, its
// supervisor stops, then its broker client is closed. It waits for that
// within ctx; when ctx ends first the error wraps errStillStopping and the
// removal goes on, ended by finishRemoval. changed says the source is
// removed to start again with new settings.
func (n *Node) stopSource(ctx context.Context, name string, changed bool) error {
	r := &removal{name: name, since: time.Now(), done: make(chan struct{})}
	reply := n.actors.RemoveSource(name)
	n.ctl.mu.Lock()
	n.ctl.removing[name] = r
	n.ctl.mu.Unlock()
	n.ctl.finishers.Add(1)
	go n.finishRemoval(r, reply)
	return n.waitRemoval(ctx, r)
}

// finishRemoval ends r when its supervisor has stopped (closing the
// source's client) or the node stops; the reload status then no longer
// lists it as stopping.
func (n *Node) finishRemoval(r *removal, reply <-chan error) {
	defer n.ctl.finishers.Done()
	var err error
	select {
	case err = <-reply:
	case <-n.ctl.stop:
		err = errStopping
	}
	if err == nil {
		n.mu.Lock()
		src, ok := n.sources[r.name]
		delete(n.sources, r.name)
		ok = ok && !n.closed // closeAll closes the clients
		n.mu.Unlock()
		if ok {
			closeSource(src)
		}
	}
	n.ctl.mu.Lock()
	r.err = err
	delete(n.ctl.removing, r.name)
	if n.ctl.reload != nil && err == nil && slices.Contains(n.ctl.reload.Stopping, r.name) {
		st := *n.ctl.reload
		settle(&st, n.ctl.removing)
		n.ctl.reload = &st
		n.log.Info("reload: source removed", "source", r.name, "took", time.Since(r.since).Round(time.Millisecond))
	}
	n.ctl.mu.Unlock()
	close(r.done)
}

// waitRemoval waits for r to end within ctx.
func (n *Node) waitRemoval(ctx context.Context, r *removal) error {
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("remove source %s: %w", r.name, r.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("remove source %s: %w after %v: its units have not handed over yet; it shows stopping in the tree, its removal goes on and ends by itself",
			r.name, errStillStopping, time.Since(r.since).Round(time.Millisecond))
	}
}

// startSource runs an opened source; when the node refuses it its client
// is closed. It waits for the node's answer, which comes at once, whatever
// is left of the reload's time: a source the node runs is never taken for
// one it does not (or its client closed under it).
func (n *Node) startSource(name string, o openedSource) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		closeSource(o.src)
		return fmt.Errorf("start source %s: %w", name, errStopping)
	}
	n.sources[name] = o.src
	n.mu.Unlock()
	select {
	case err := <-n.actors.AddSource(o.spec):
		if err != nil {
			n.mu.Lock()
			delete(n.sources, name)
			n.mu.Unlock()
			closeSource(o.src)
			return fmt.Errorf("start source %s: %w", name, err)
		}
		return nil
	case <-n.ctl.stop:
		// the node's close closes the client with the others
		return fmt.Errorf("start source %s: %w", name, errStopping)
	}
}
