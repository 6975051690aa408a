package awstest

import (
	"testing"
	"time"
)

// Compare runs an adapter's side and the raw SDK client's side of a
// benchmark once per iteration of b, alternating which goes first so that
// neither always meets the emulator in the state the other left. Each side
// handles n items (unit "rec" or "msg") and returns the time it took.
// Compare reports the rate of each side, as "adapter-UNIT/s" and
// "raw-UNIT/s", and the adapter's share of the raw rate in percent.
func Compare(b *testing.B, n int, unit string, adapter, raw func() time.Duration) {
	var adapterTime, rawTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			adapterTime += adapter()
			rawTime += raw()
		} else {
			rawTime += raw()
			adapterTime += adapter()
		}
	}
	b.StopTimer()
	adapterRate := float64(n*b.N) / adapterTime.Seconds()
	rawRate := float64(n*b.N) / rawTime.Seconds()
	b.ReportMetric(adapterRate, "adapter-"+unit+"/s")
	b.ReportMetric(rawRate, "raw-"+unit+"/s")
	b.ReportMetric(100*adapterRate/rawRate, "adapter/raw-%")
}
