package actors

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// deafReader is a memory reader whose Waker misses every call but the
// one it makes at once, before Wake returns (when the reader already has
// something): a broker that misses calls.
type deafReader struct{ countedReader }

func (r *deafReader) Wake(f func()) (cancel func()) {
	var arranging atomic.Bool
	arranging.Store(true)
	defer arranging.Store(false)
	return r.Reader.Wake(func() {
		if arranging.Load() {
			f()
		}
	})
}

// The safety sweep looks at passive units without spawning them: quiet
// units stay passive through several sweeps (no activation), and a
// message whose call the broker missed is still found by the next
// sweep's check and applied.
func TestSweepChecksPassiveUnitsWithoutSpawning(t *testing.T) {
	const parts = 4
	const safety = 150 * time.Millisecond
	w := newPassiveWorldOf(t, parts, true, func(tu *Tuning) { tu.WakeSafety = safety })
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	checks := len(w.traced("wake-check", ""))
	waitUntilf(t, w.state, func() bool { return len(w.traced("wake-check", "")) >= checks+3*parts })
	if got := w.traced("activated", ""); len(got) != 0 {
		t.Errorf("%d activations of quiet passive units (the sweep spawned them): %+v", len(got), got)
	}
	for p := 0; p < parts; p++ {
		if _, err := w.st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d"}`, p))}); err != nil {
			t.Fatal(err)
		}
	}
	// the deaf readers never call: only the sweep's check finds them
	waitUntilf(t, w.state, func() bool { return w.count(func(u UnitStatus) bool { return u.Applied == 1 }) == parts })
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	if n := len(w.traced("activated", "")); n < parts {
		t.Errorf("%d activations, want at least %d (one per unit the check found)", n, parts)
	}
}
