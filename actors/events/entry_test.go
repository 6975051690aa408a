package events

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/drover-dev/drover/internal/clock"
)

// maxEntry bounds what the ring keeps per event: 10,000 of them are a
// node's idle cost (it was 144 bytes; see entry).
const maxEntry = 56

func TestEntryStaysSmall(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > maxEntry {
		t.Errorf("an entry is %d bytes, want at most %d: 10,000 of them are kept whatever runs", n, maxEntry)
	}
}

// The kinds an idle or churning node records keep nothing on the heap
// besides their entry.
func TestCommonEventsAllocateNothing(t *testing.T) {
	l := New("n1", &stepClock{t: t0}, 16)
	common := []Event{
		{Source: "src", Unit: "src/1", Kind: KindAssigned, Members: 3},
		{Source: "src", Unit: "src/1", Kind: KindGivenUp, Members: 3},
		{Source: "src", Unit: "src/1", Kind: KindAcquired, Token: 8, PrevToken: 7},
		{Source: "src", Unit: "src/1", Kind: KindAcquired, Token: 8, PrevOwner: "n1", PrevToken: 7},
		{Source: "src", Unit: "src/1", Kind: KindReleased, Token: 8},
		{Source: "src", Unit: "src/1", Kind: KindAcquired, Token: 8, Time: time.Now()},
	}
	for _, e := range common {
		for range 16 {
			l.Record(e) // the ring full: no growth counted
		}
		if n := testing.AllocsPerRun(100, func() { l.Record(e) }); n != 0 {
			t.Errorf("recording %+v allocates %.0f times, want none", e, n)
		}
	}
}

// setClock tells the time it is set to.
type setClock struct{ t time.Time }

func (c *setClock) Now() time.Time { return c.t }

func (c *setClock) AfterFunc(time.Duration, func()) clock.Timer { panic("not used") }

// Every event reads back as it was recorded, whatever its shape: each
// field set or not, each kind and others, another node's, a source that
// does not start its unit, times in other locations or out of int64
// nanoseconds; Seq, Node and Time stamped as Record documents. The ring
// keeps most of them in a form of its own (entry), others whole.
func TestRingRoundTripsEveryShape(t *testing.T) {
	fixed := time.FixedZone("X", 5*3600+1800)
	times := []time.Time{{}, t0, t0.Add(time.Nanosecond), t0.In(time.Local), t0.In(fixed), time.Now(),
		time.Unix(0, 0).UTC(), time.Unix(-1, 999).UTC(), time.Date(1600, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(3000, 6, 1, 12, 0, 0, 0, time.Local), time.Unix(0, math.MaxInt64).UTC(), time.Unix(0, math.MinInt64).In(time.Local),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}
	units := [][2]string{{"src", "src/1"}, {"", "src/1"}, {"src", ""}, {"", ""}, {"other", "src/1"},
		{"src/1", "src/1"}, {"s", "src/1"}, {"src/1/x", "src/1"},
		{strings.Repeat("s", math.MaxUint16+1), strings.Repeat("s", math.MaxUint16+1) + "/0"}}
	kindsToo := []string{"", KindAssigned, KindGivenUp, KindAcquired, KindTakeover, KindLeaseLost, KindReleased,
		KindRestart, KindPositionReset, KindControl, "passivated", "ACQUIRED"}
	nodes := []string{"", "n1", "n2"}
	owners := []string{"", "n1", "n2"}
	tokens := []int64{0, 1, -3, math.MaxInt64, math.MinInt64}
	members := []int{0, 3, -1, math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1}
	texts := []string{"", "x", "naïve — ünicode"}

	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) int { return rnd.IntN(n) }
	var es []Event
	for range 5000 {
		su := units[pick(len(units))]
		es = append(es, Event{Seq: uint64(pick(3)), Time: times[pick(len(times))], Node: nodes[pick(len(nodes))],
			Source: su[0], Unit: su[1], Kind: kindsToo[pick(len(kindsToo))], PrevOwner: owners[pick(len(owners))],
			PrevToken: tokens[pick(len(tokens))], Token: tokens[pick(len(tokens))], Members: members[pick(len(members))],
			Action: texts[pick(len(texts))], By: texts[pick(len(texts))], Reason: texts[pick(len(texts))]})
	}
	for _, capacity := range []int{len(es), 7} { // all kept, and a ring wrapped many times
		clk := &setClock{}
		l := New("n1", clk, capacity)
		var want []Event
		for i, e := range es {
			clk.t = time.Now() // local, with a monotonic reading
			w := e
			if w.Time.IsZero() {
				w.Time = clk.t
			}
			w.Time = w.Time.Round(0)
			if w.Node == "" {
				w.Node = "n1"
			}
			w.Seq = uint64(i + 1)
			want = append(want, w)
			l.Record(e)
		}
		want = want[len(want)-capacity:]
		got := l.Query(Filter{})
		if len(got) != len(want) {
			t.Fatalf("capacity %d: %d events back, want %d", capacity, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] { // ==: the same instant in the same location
				t.Fatalf("capacity %d: recorded %+v\n      got %+v", capacity, want[i], got[i])
			}
			if gj, wj := mustJSON(t, got[i]), mustJSON(t, want[i]); gj != wj {
				t.Fatalf("capacity %d: JSON %s, want %s", capacity, gj, wj)
			}
		}
	}
}

func mustJSON(t *testing.T, e Event) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil && !strings.Contains(err.Error(), "year outside of range") {
		t.Fatal(err)
	}
	return string(b)
}

// typicalUnits are the ids of 10,000 units of one source, made once: the
// runtime's units hold their ids anyway, so the log's share is its entries.
var typicalUnits = func() []string {
	us := make([]string, DefaultCapacity)
	for i := range us {
		us[i] = fmt.Sprintf("src/%d", i)
	}
	return us
}()

// recordTypical fills l with the events of an idle, churning node: its
// own acquisitions (of a released lease: the previous token) and
// releases, stamped by the log's clock.
func recordTypical(l *Log) {
	for i, u := range typicalUnits {
		if i%2 == 0 {
			l.Record(Event{Source: "src", Unit: u, Kind: KindAcquired, Token: int64(i + 2), PrevToken: int64(i + 1)})
		} else {
			l.Record(Event{Source: "src", Unit: u, Kind: KindReleased, Token: int64(i + 1)})
		}
	}
}

// BenchmarkLogLiveBytes reports the live heap a full ring of typical
// events keeps, per event (live-B/event).
func BenchmarkLogLiveBytes(b *testing.B) {
	var ms runtime.MemStats
	var perEvent float64
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		l := New("n1", &stepClock{t: time.Date(2026, 12, 4, 0, 0, 0, 0, time.Local)}, DefaultCapacity)
		recordTypical(l)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		perEvent = float64(ms.HeapAlloc-before) / DefaultCapacity
		runtime.KeepAlive(l)
	}
	b.ReportMetric(perEvent, "live-B/event")
}
