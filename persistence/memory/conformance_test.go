package memory_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/memory"
	"github.com/drover-dev/drover/persistence/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Clock: true,
		Open: func(t *testing.T, clk clock.Clock) persistence.Store {
			s := memory.New(memory.Config{Clock: clk})
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Refuse: func(t *testing.T, s persistence.Store, table string) {
			s.(*memory.Store).Refuse(table, "bad")
		},
	})
}
