package events

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/clock"
)

// stepClock moves one second forward at every Now.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *stepClock) AfterFunc(time.Duration, func()) clock.Timer { panic("not used") }

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func TestRingKeepsTheLastCapacityInOrder(t *testing.T) {
	l := New("n1", &stepClock{t: t0}, 3)
	for i := range 7 {
		l.Record(Event{Unit: fmt.Sprintf("s/%d", i), Kind: KindAcquired})
	}
	got := l.Query(Filter{})
	if len(got) != 3 {
		t.Fatalf("kept %d events, want 3: %+v", len(got), got)
	}
	for i, e := range got {
		if want := fmt.Sprintf("s/%d", i+4); e.Unit != want || e.Seq != uint64(i+5) || e.Node != "n1" {
			t.Errorf("event %d = %+v, want unit %s seq %d node n1", i, e, want, i+5)
		}
		if want := t0.Add(time.Duration(i+5) * time.Second); !e.Time.Equal(want) {
			t.Errorf("event %d at %s, want %s (the log's clock)", i, e.Time, want)
		}
	}
	if len(l.buf) != 3 || cap(l.buf) > 4 {
		t.Errorf("ring holds %d (cap %d), want 3: memory must stay bounded", len(l.buf), cap(l.buf))
	}
}

// A full ring's backing array is exactly its capacity: growing it as
// append does would keep up to a quarter more slots for good (at the
// default capacity, 10,000 events of a cold start of 10,000 units).
func TestRingGrowsToItsCapacityExactly(t *testing.T) {
	for _, capacity := range []int{DefaultCapacity, 1000, 17} {
		l := New("n1", &stepClock{t: t0}, capacity)
		for i := range capacity + 5 {
			l.Record(Event{Unit: fmt.Sprintf("s/%d", i), Kind: KindAcquired})
		}
		if len(l.buf) != capacity || cap(l.buf) != capacity {
			t.Errorf("capacity %d: ring holds %d events in %d slots, want %d in %d", capacity, len(l.buf), cap(l.buf), capacity, capacity)
		}
		if got := l.Query(Filter{}); len(got) != capacity || got[0].Seq != 6 || got[capacity-1].Seq != uint64(capacity+5) {
			t.Errorf("capacity %d: query gives %d events, seq %d to %d", capacity, len(got), got[0].Seq, got[len(got)-1].Seq)
		}
	}
}

func TestFilterAndLimit(t *testing.T) {
	l := New("n1", &stepClock{t: t0}, 100)
	for i := range 10 {
		src := "orders"
		if i%2 == 1 {
			src = "users"
		}
		l.Record(Event{Source: src, Unit: fmt.Sprintf("%s/%d", src, i%4), Kind: KindAssigned})
	}
	// times are t0+1s … t0+10s
	cases := []struct {
		name string
		f    Filter
		seqs []uint64
	}{
		{"all", Filter{}, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"unit", Filter{Unit: "orders/0"}, []uint64{1, 5, 9}},
		{"source", Filter{Source: "users"}, []uint64{2, 4, 6, 8, 10}},
		{"since", Filter{Since: t0.Add(8 * time.Second)}, []uint64{8, 9, 10}},
		{"limit keeps the last", Filter{Source: "orders", Limit: 2}, []uint64{7, 9}},
		{"nothing", Filter{Unit: "orders/1"}, []uint64{}},
	}
	for _, c := range cases {
		got := l.Query(c.f)
		seqs := []uint64{}
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.seqs) {
			t.Errorf("%s: seqs %v, want %v", c.name, seqs, c.seqs)
		}
	}
}

func TestMergeOrdersByTimeAndDropsRepeats(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := []Event{{Node: "a", Seq: 1, Time: at(1)}, {Node: "a", Seq: 2, Time: at(5)}}
	b := []Event{{Node: "b", Seq: 1, Time: at(3)}, {Node: "b", Seq: 2, Time: at(5)}, {Node: "b", Seq: 3, Time: at(9)}}
	got := Merge(0, b, a, b[:1]) // b's first twice: once in the answer
	var ids []string
	for _, e := range got {
		ids = append(ids, fmt.Sprintf("%s%d", e.Node, e.Seq))
	}
	if want := "a1 b1 a2 b2 b3"; strings.Join(ids, " ") != want {
		t.Errorf("merged %v, want %s", ids, want)
	}
	if got := Merge(2, a, b); len(got) != 2 || got[0].Node != "b" || got[0].Seq != 2 || got[1].Seq != 3 {
		t.Errorf("merge with limit 2 = %+v, want the last two (b2, b3)", got)
	}
	if got := Merge(0); got == nil {
		t.Error("merge of nothing is nil, want []")
	}
}

func TestReasonIsMaskedAndBounded(t *testing.T) {
	l := New("n1", nil, 10)
	l.Record(Event{Kind: KindRestart, Reason: "dial postgres://drover:hunter2@db:5432/x: refused"})
	l.Record(Event{Kind: KindRestart, Reason: strings.Repeat("é", 2000)})
	got := l.Query(Filter{})
	if strings.Contains(got[0].Reason, "hunter2") || !strings.Contains(got[0].Reason, "refused") {
		t.Errorf("reason %q: want the password masked and the rest kept", got[0].Reason)
	}
	if r := got[1].Reason; len(r) > maxReason+len("…") || !strings.HasSuffix(r, "…") || !utf8Valid(r) {
		t.Errorf("long reason kept %d bytes (valid UTF-8 %v), want at most %d and a cut mark", len(r), utf8Valid(r), maxReason)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestNilLogIsEmpty(t *testing.T) {
	var l *Log
	l.Record(Event{Kind: KindControl})
	if got := l.Query(Filter{}); got == nil || len(got) != 0 {
		t.Errorf("nil log query = %v, want []", got)
	}
}

func TestConcurrentRecordAndQuery(t *testing.T) {
	l := New("n1", nil, 50)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				l.Record(Event{Unit: fmt.Sprintf("u/%d", w), Kind: KindAcquired, Token: int64(i)})
				_ = l.Query(Filter{Unit: "u/1", Limit: 5})
			}
		})
	}
	wg.Wait()
	got := l.Query(Filter{})
	if len(got) != 50 || got[49].Seq != 800 {
		t.Fatalf("after 800 records: %d kept, last seq %d; want 50 and 800", len(got), got[len(got)-1].Seq)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq+1 {
			t.Fatalf("seq %d after %d: the ring lost its order", got[i].Seq, got[i-1].Seq)
		}
	}
}

// Every field of an Event comes back from the ring as recorded (the ring
// keeps events in a form of its own: a field added to Event and not to
// it would be lost).
func TestRingKeepsEveryField(t *testing.T) {
	l := New("n1", &stepClock{t: t0}, 4)
	e := Event{}
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-x")
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(40 + i))
		case reflect.Uint64:
			f.SetUint(0) // Seq: the log stamps it
		case reflect.Struct: // Time
			f.Set(reflect.ValueOf(t0.Add(time.Hour)))
		default:
			t.Fatalf("field %s of kind %s: fill it here", v.Type().Field(i).Name, f.Kind())
		}
	}
	for _, node := range []string{"n2", ""} { // another node's, and the log's own
		want := e
		want.Node = node
		l.Record(want)
		got := l.Query(Filter{})
		last := got[len(got)-1]
		want.Seq = uint64(len(got))
		if want.Node == "" {
			want.Node = "n1"
		}
		if !reflect.DeepEqual(last, want) {
			t.Errorf("recorded %+v\n      got %+v", want, last)
		}
	}
}
