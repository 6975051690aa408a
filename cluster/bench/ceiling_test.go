package bench

import (
	"context"
	"errors"
	"testing"
)

// writeAll returns the failure that stopped the writers, not the
// cancellation it caused in the others (whichever index they have).
func TestWriteAllReturnsTheFirstFailure(t *testing.T) {
	boom := errors.New("disk full")
	err := writeAll(t.Context(), 3, func(ctx context.Context, i int) error {
		if i == 2 {
			return boom
		}
		<-ctx.Done() // a writer waiting for work sees the cancellation
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Errorf("writeAll = %v, want the writer's failure %v", err, boom)
	}
}
