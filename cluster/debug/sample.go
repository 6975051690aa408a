package debug

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/drover-dev/drover/internal/clock"
)

// sampleLoop takes a cluster sample at once and then every SampleEvery
// until ctx ends; it closes done when it returns.
func (s *Server) sampleLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tick := make(chan struct{}, 1)
	for {
		if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("debug endpoint: cluster sample", "err", err)
		}
		t := clock.AfterFunc(s.cfg.Clock, s.cfg.SampleEvery, "debug-sample", func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
		}
	}
}

// Sample reads the cluster tree once (one fan-out, or the one in flight)
// and adds it to the history at the Clock's now; the memory of gone
// members sees it too. A Node that is a CounterReader is read for its
// units' counters, when the sample is added, instead of its tree. Start calls it every SampleEvery; embedders
// without the background sampler may call it themselves.
func (s *Server) Sample(ctx context.Context) error {
	local, _ := s.cfg.Node.(CounterReader)
	f, err := s.fanOut(ctx, local)
	if err != nil {
		return fmt.Errorf("cluster tree: %w", err)
	}
	if !f.lazy {
		local = nil // a page's fan-out, shared: its tree has this node's units
	}
	s.hist.addTree(s.cfg.Clock.Now(), f.ct, f.self, local)
	return nil
}

// serveHistory serves GET /debug/history (authorized like every read route).
func (s *Server) serveHistory(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(s.hist.view(s.cfg.Clock.Now()))
	s.writeJSON(w, "history", b, err)
}
