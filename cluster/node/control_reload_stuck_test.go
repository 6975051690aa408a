package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// stuckStreams are sharedStreams whose source "stuck" can be made to hang:
// once armed, its readers' fetches block, deaf to their context, until
// released, so that its units cannot hand over (as a broker call that
// ignores its cancellation would hold them).
type stuckStreams struct {
	sharedStreams
	mu       sync.Mutex
	armed    bool
	entered  chan struct{} // closed when a fetch blocked
	release  chan struct{}
	onceIn   sync.Once
	onceFree sync.Once
}

func newStuckStreams() *stuckStreams {
	return &stuckStreams{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stuckStreams) open(ctx context.Context, src config.Source, log *slog.Logger) (Source, error) {
	o, err := s.sharedStreams.open(ctx, src, log)
	if err != nil || src.Name != "stuck" {
		return o, err
	}
	return Source{Stream: stuckStream{o.Stream, s}}, nil
}

func (s *stuckStreams) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *stuckStreams) free() { s.onceFree.Do(func() { close(s.release) }) }

type stuckStream struct {
	brokers.Stream
	s *stuckStreams
}

func (st stuckStream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	r, err := st.Stream.Open(ctx, partition, start)
	if err != nil {
		return nil, err
	}
	return stuckReader{r, st.s}, nil
}

type stuckReader struct {
	brokers.Reader
	s *stuckStreams
}

func (r stuckReader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	r.s.mu.Lock()
	armed := r.s.armed
	r.s.mu.Unlock()
	if armed {
		r.s.onceIn.Do(func() { close(r.s.entered) })
		<-r.s.release
	}
	return r.Reader.Fetch(ctx, max, wait)
}

// A reload whose removal of a source does not end in its time (the
// source's units cannot hand over) says so, and the node's view stays
// true: the reply (500 over HTTP: ErrControlIncomplete), the tree and the
// audit row say what was applied (a source added) and what still stops;
// the node no longer counts the source as running; a later reload waits
// for the removal again; a file that brings the source back cannot start
// it while it still stops (not applied) and starts it once it stopped.
func TestReloadRemovalThatDoesNotEndInTime(t *testing.T) {
	keep, stuck, added := auditSource("keep", 1, ""), auditSource("stuck", 1, ""), auditSource("added", 1, "")
	streams := newStuckStreams()
	dir, bind := t.TempDir(), freeGossipAddr(t)
	yaml := func(sources ...string) string { return controlYAML("n1", bind, bind, dir, sources...) }
	// a unit's stop is not cut short while the test looks
	n, path := startFromFileWith(t, yaml(keep, stuck), Options{OpenSource: streams.open, Tuning: actors.Tuning{StopTimeout: 10 * time.Minute}})
	t.Cleanup(streams.free) // before Close: the blocked fetch returns
	n.ctl.reloadTimeout = 300 * time.Millisecond
	eventually(t, "keep and stuck running", func() bool { return runningAll(n, "keep", 1) && runningAll(n, "stuck", 1) })
	streams.arm()
	select {
	case <-streams.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no fetch of stuck blocked")
	}

	reload := func() (actors.ReloadStatus, error) {
		t.Helper()
		rep, err := n.Control(t.Context(), debug.ControlRequest{Action: debug.ActionReload, By: "ann"})
		st, _ := rep.Result.(actors.ReloadStatus)
		return st, err
	}
	stoppingInTree := func() bool {
		for _, s := range n.Tree().Sources {
			if s.Name == "stuck" {
				return s.State == actors.StateStopping
			}
		}
		return false
	}

	// stuck removed, added added: the removal does not end in time
	writeFile(t, path, yaml(keep, added))
	st, err := reload()
	if !errors.Is(err, debug.ErrControlIncomplete) || !strings.Contains(err.Error(), "remove source stuck: still stopping") {
		t.Fatalf("reload error %v, want ErrControlIncomplete naming the removal of stuck", err)
	}
	if st.OK || !slices.Equal(st.Added, []string{"added"}) || len(st.Removed) > 0 || len(st.NotApplied) > 0 || !slices.Equal(st.Stopping, []string{"stuck"}) {
		t.Fatalf("reload status %+v: want added [added], stopping [stuck], not ok", st)
	}
	if tr := n.Tree(); tr.Reload == nil || !slices.Equal(tr.Reload.Stopping, []string{"stuck"}) || tr.Reload.OK {
		t.Fatalf("tree reload %+v", tr.Reload)
	}
	if !stoppingInTree() {
		t.Errorf("tree: stuck is not stopping: %+v", n.Tree().Sources)
	}
	if slices.ContainsFunc(n.runningSources(), func(s config.Source) bool { return s.Name == "stuck" }) {
		t.Errorf("the node still counts stuck as running")
	}
	eventually(t, "added running", func() bool { return runningAll(n, "added", 1) })
	as, err := n.store.ListAudit(t.Context(), persistence.AuditFilter{})
	if err != nil || len(as) != 1 || as[0].Action != "reload" || as[0].By != "ann" ||
		!strings.HasPrefix(as[0].Args, "reload incomplete: added added; still stopping stuck; error: remove source stuck: still stopping") {
		t.Fatalf("audit of the incomplete reload: %+v, %v", as, err)
	}

	// the same file again: the reload waits for the removal, which still
	// does not end
	st, err = reload()
	if !errors.Is(err, debug.ErrControlIncomplete) || st.OK || !slices.Equal(st.Stopping, []string{"stuck"}) || len(st.Added)+len(st.Removed) > 0 {
		t.Fatalf("second reload: %+v, %v", st, err)
	}
	// a file that brings stuck back: it cannot start while it stops
	writeFile(t, path, yaml(keep, added, stuck))
	st, err = reload()
	if !errors.Is(err, debug.ErrControlIncomplete) || st.OK || !slices.Equal(st.NotApplied, []string{"stuck"}) || !slices.Equal(st.Stopping, []string{"stuck"}) {
		t.Fatalf("reload bringing stuck back while it stops: %+v, %v", st, err)
	}

	// the units hand over at last: the removal ends by itself
	streams.free()
	eventually(t, "stuck's removal ended", func() bool {
		tr := n.Tree()
		return tr.Reload != nil && len(tr.Reload.Stopping) == 0 && !slices.ContainsFunc(tr.Sources, func(s actors.SourceStatus) bool { return s.Name == "stuck" })
	})
	if tr := n.Tree(); !slices.Equal(tr.Reload.NotApplied, []string{"stuck"}) || len(tr.Reload.Removed) > 0 {
		t.Errorf("tree reload after the removal ended: %+v (stuck's return is still not applied)", tr.Reload)
	}
	n.mu.Lock()
	_, open := n.sources["stuck"]
	n.mu.Unlock()
	if open {
		t.Errorf("stuck's client is still open after its removal ended")
	}
	// the next reload of that file starts it
	st, err = reload()
	if err != nil || !st.OK || !slices.Equal(st.Added, []string{"stuck"}) {
		t.Fatalf("reload after the removal ended: %+v, %v", st, err)
	}
	eventually(t, "stuck running again", func() bool { return runningAll(n, "stuck", 1) })
	as, err = n.store.ListAudit(t.Context(), persistence.AuditFilter{})
	if err != nil || len(as) != 4 || as[3].Args != "added stuck" {
		t.Errorf("audit entries %+v, %v", as, err)
	}
}
