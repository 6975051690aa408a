package node

import (
	"context"
	"errors"
	"fmt"
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

// controlReload carries out drover reload: the reload's outcome, or 400
// naming what is wrong with the file.
func (n *Node) controlReload(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	rep := debug.ControlReply{Action: req.Action, Node: n.cfg.Node.Name}
	if req.Source != "" || req.Unit != "" || req.To != "" {
		return rep, fmt.Errorf("%w: reload takes no source, unit or position: it re-reads the node's config file", debug.ErrBadControl)
	}
	st, err := n.Reload(ctx)
	switch {
	case errors.Is(err, ErrReloadInvalid):
		return rep, fmt.Errorf("%w: %v", debug.ErrBadControl, err)
	case errors.Is(err, errStopping):
		return rep, fmt.Errorf("%w: %v", debug.ErrControlConflict, err)
	case err != nil:
		// Part of it may have been applied (sources stopped or
		// started): the audit says what, and that it failed.
		n.audit(ctx, req, strings.TrimPrefix(reloadDetail(st), "reloaded: ")+"; failed: "+err.Error())
		return rep, err
	}
	rep.Result = st
	rep.Detail = reloadDetail(st)
	n.audit(ctx, req, strings.TrimPrefix(rep.Detail, "reloaded: "))
	return rep, nil
}

var errStopping = errors.New("the node is stopping")

// reloadTimeout bounds a reload: opening the new clients and handing the
// removed and changed sources' units over.
const reloadTimeout = 2 * time.Minute

func reloadDetail(st actors.ReloadStatus) string {
	if len(st.Added)+len(st.Removed)+len(st.Changed) == 0 {
		return "reloaded: no source changed"
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", st.Added}, {"removed", st.Removed}, {"changed", st.Changed}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	return "reloaded: " + strings.Join(parts, "; ")
}

// Reload reads the node's config file again (Options.ConfigPath), checks
// it as drover check does (config.Load), and applies the difference to the
// running node: added sources start, removed ones hand their units over
// (finish the batch, checkpoint, release the lease) and stop, changed ones
// do both, the new settings and a new broker client replacing the old;
// the others are not touched. A file that does not load, or that changes
// anything but sources (config.Compare), changes nothing: the error wraps
// ErrReloadInvalid and names the fields. Every outcome is logged and
// shown in the tree (reload). One reload runs at a time.
func (n *Node) Reload(ctx context.Context) (actors.ReloadStatus, error) {
	n.ctl.op.Lock()
	defer n.ctl.op.Unlock()
	// A caller that gives up (a CLI timeout) does not cut a reload short
	// half-way: it runs to its end, within reloadTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reloadTimeout)
	defer cancel()
	st, err := n.reload(ctx)
	st.At = time.Now().UTC()
	st.OK = err == nil
	if err != nil {
		st.Error = err.Error()
		n.log.Error("reload", "config", n.opt.ConfigPath, "error", err)
	} else {
		n.log.Info("reloaded", "config", n.opt.ConfigPath, "added", st.Added, "removed", st.Removed, "changed", st.Changed)
	}
	n.ctl.mu.Lock()
	n.ctl.reload = &st
	n.ctl.mu.Unlock()
	return st, err
}

func (n *Node) reload(ctx context.Context) (actors.ReloadStatus, error) {
	var st actors.ReloadStatus
	n.ctl.mu.Lock()
	stopping := n.ctl.stopping
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
	for _, name := range slices.Concat(d.Removed, d.Changed) {
		if err := n.stopSource(ctx, name); err != nil {
			errs = append(errs, err)
			if o, ok := opened[name]; ok {
				closeSource(o.src)
				delete(opened, name)
			}
			continue
		}
		applied.Sources = slices.DeleteFunc(applied.Sources, func(s config.Source) bool { return s.Name == name })
		if slices.Contains(d.Removed, name) {
			st.Removed = append(st.Removed, name)
		}
	}
	for _, name := range starting {
		o, ok := opened[name]
		if !ok {
			continue
		}
		if err := n.startSource(ctx, name, o); err != nil {
			errs = append(errs, err)
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
	n.ctl.mu.Lock()
	n.ctl.applied = &applied
	n.ctl.mu.Unlock()
	return st, errors.Join(errs...)
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
// supervisor stops, then its broker client is closed.
func (n *Node) stopSource(ctx context.Context, name string) error {
	if err := n.wait(ctx, n.actors.RemoveSource(name)); err != nil {
		return fmt.Errorf("remove source %s: %w", name, err)
	}
	n.mu.Lock()
	src, ok := n.sources[name]
	delete(n.sources, name)
	n.mu.Unlock()
	if ok {
		closeSource(src)
	}
	return nil
}

// startSource runs an opened source; on failure its client is closed.
func (n *Node) startSource(ctx context.Context, name string, o openedSource) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		closeSource(o.src)
		return fmt.Errorf("start source %s: %w", name, errStopping)
	}
	n.sources[name] = o.src
	n.mu.Unlock()
	if err := n.wait(ctx, n.actors.AddSource(o.spec)); err != nil {
		n.mu.Lock()
		delete(n.sources, name)
		n.mu.Unlock()
		closeSource(o.src)
		return fmt.Errorf("start source %s: %w", name, err)
	}
	return nil
}

// wait waits for a source change's answer, ctx's end or the node's stop.
func (n *Node) wait(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-n.ctl.stop:
		return errStopping
	}
}
