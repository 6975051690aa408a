package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/memory"
)

// hangingCheckpoints answers only when the call's context ends.
type hangingCheckpoints struct{}

func (hangingCheckpoints) Checkpoint(ctx context.Context, _ string) (persistence.Checkpoint, error) {
	<-ctx.Done()
	return persistence.Checkpoint{}, ctx.Err()
}

func (hangingCheckpoints) Checkpoints(ctx context.Context, _ string) ([]persistence.Checkpoint, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The readiness check needs only the Checkpoints role: a store that has
// never seen the health unit is healthy, one that does not answer is not,
// within the check's own timeout.
func TestCheckStore(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	if err := checkStore(t.Context(), s, time.Second); err != nil {
		t.Errorf("a store without the health checkpoint: %v, want healthy", err)
	}
	start := time.Now()
	err := checkStore(t.Context(), hangingCheckpoints{}, 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a store that does not answer: %v, want the check's deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the check of a silent store took %s", took)
	}
}

type failingDedupe struct{ err error }

func (f failingDedupe) PruneDedupe(context.Context, time.Time) (int64, error) { return 0, f.err }

// Pruning needs only the Dedupe role; a failure is a warning naming it.
func TestPruneOnceLogsFailure(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	pruneOnce(t.Context(), failingDedupe{errors.New("disk full")}, time.Now(), log)
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "disk full") {
		t.Errorf("log = %q, want a warning with the store's error", got)
	}
}
