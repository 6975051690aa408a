package debug

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/actors/placement"
)

// fixedClock is a clock stopped at t.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }
func (c fixedClock) AfterFunc(time.Duration, func()) actors.Timer {
	panic("not used")
}

var evT0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

// logOf is a log of node with events at evT0 + the given seconds.
func logOf(node string, es ...events.Event) *events.Log {
	l := events.New(node, fixedClock{evT0}, 100)
	for _, e := range es {
		l.Record(e)
	}
	return l
}

func at(s int) time.Time { return evT0.Add(time.Duration(s) * time.Second) }

func eventsOf(t *testing.T, r response) EventsAnswer {
	t.Helper()
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	var a EventsAnswer
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return a
}

func TestEventsOfThisNodeFiltered(t *testing.T) {
	l := logOf("a",
		events.Event{Time: at(1), Source: "orders", Unit: "orders/0", Kind: events.KindAssigned, Members: 3},
		events.Event{Time: at(2), Source: "orders", Unit: "orders/1", Kind: events.KindAcquired, Token: 4},
		events.Event{Time: at(3), Source: "users", Unit: "users/0", Kind: events.KindAcquired, Token: 1},
		events.Event{Time: at(4), Source: "orders", Unit: "orders/0", Kind: events.KindTakeover, PrevOwner: "b", PrevToken: 6, Token: 7},
	)
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "a"}}}, Events: l, Clock: fixedClock{at(10)}})
	base := "http://" + s.Addr() + "/debug/events"
	for _, c := range []struct {
		q    string
		seqs string
	}{
		{"", "1 2 3 4"},
		{"?unit=orders/0", "1 4"},
		{"?source=orders&limit=2", "2 4"},
		{"?since=" + url.QueryEscape(at(3).Format(time.RFC3339)), "3 4"},
		{"?since=7s", "3 4"}, // 7 s before the server's clock (at 10)
		{"?unit=orders/9", ""},
	} {
		a := eventsOf(t, get(t, base+c.q))
		var seqs []string
		for _, e := range a.Events {
			seqs = append(seqs, fmt.Sprint(e.Seq))
		}
		if got := strings.Join(seqs, " "); got != c.seqs || a.Node != "a" {
			t.Errorf("%s: node %q seqs %q, want a and %q", c.q, a.Node, got, c.seqs)
		}
	}
	r := get(t, base+"?unit=orders/0")
	for _, f := range []string{`"prev_owner":"b"`, `"prev_token":6`, `"token":7`, `"kind":"takeover"`, `"members":3`, `"time":"2026-12-02T01:00:04Z"`} {
		if !strings.Contains(r.body, f) {
			t.Errorf("answer lacks %s: %s", f, r.body)
		}
	}
	if r := get(t, base+"?unit=none"); !strings.Contains(r.body, `"events":[]`) {
		t.Errorf("no match must be [], not null: %s", r.body)
	}
}

func TestEventsBadParameters(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "a"}}}, Events: logOf("a")})
	for q, want := range map[string]string{
		"?limit=0":         `limit "0"`,
		"?limit=x":         `limit "x"`,
		"?limit=10001":     `limit "10001"`,
		"?since=yesterday": `since "yesterday"`,
		"?scope=world":     `scope "world"`,
	} {
		r := get(t, "http://"+s.Addr()+"/debug/events"+q)
		if r.code != 400 || !strings.Contains(r.body, want) {
			t.Errorf("%s: %d %q, want 400 naming %s", q, r.code, r.body, want)
		}
	}
}

func TestEventsClusterScopeMergesByTime(t *testing.T) {
	lb := logOf("b",
		events.Event{Time: at(1), Source: "orders", Unit: "orders/0", Kind: events.KindAcquired, Token: 5},
		events.Event{Time: at(5), Source: "orders", Unit: "orders/0", Kind: events.KindLeaseLost, Token: 5, Reason: "found lost at renew"},
		events.Event{Time: at(6), Source: "orders", Unit: "orders/1", Kind: events.KindAcquired, Token: 1},
	)
	b := start(t, Config{Token: "shared", Node: &fakeNode{trees: []actors.Tree{{Node: "b"}}}, Events: lb})
	c := start(t, Config{Token: "other", Node: &fakeNode{trees: []actors.Tree{{Node: "c"}}}, Events: logOf("c")})
	la := logOf("a",
		events.Event{Time: at(3), Source: "orders", Unit: "orders/0", Kind: events.KindAssigned, Members: 2},
		events.Event{Time: at(4), Source: "orders", Unit: "orders/0", Kind: events.KindTakeover, PrevOwner: "b", PrevToken: 5, Token: 6},
	)
	a := &fakeNode{trees: []actors.Tree{{Node: "a"}}}
	a.setMembers(placement.Member{Name: "a", DebugAddr: "127.0.0.1:1"}, placement.Member{Name: "b", DebugAddr: b.Addr()},
		placement.Member{Name: "c", DebugAddr: c.Addr()})
	s := start(t, Config{Token: "shared", Node: a, Events: la, MembersAuthenticated: true})
	got := eventsOf(t, get(t, "http://"+s.Addr()+"/debug/events?scope=cluster&unit=orders/0", "Authorization", "Bearer shared"))
	var seq []string
	for _, e := range got.Events {
		seq = append(seq, e.Node+":"+e.Kind)
	}
	if want := "b:acquired a:assigned a:takeover b:lease_lost"; strings.Join(seq, " ") != want {
		t.Errorf("merged %v, want %s", seq, want)
	}
	from := map[string]EventsFrom{}
	for _, f := range got.Nodes {
		from[f.Node] = f
	}
	if from["a"].Count != 2 || from["b"].Count != 2 || from["b"].Error != "" {
		t.Errorf("nodes %+v: want a and b with 2 each", got.Nodes)
	}
	if !strings.Contains(from["c"].Error, "401") {
		t.Errorf("c has another token and must refuse: %+v", from["c"])
	}
	// without the token the cluster scope is refused like the tree
	if r := get(t, "http://"+s.Addr()+"/debug/events?scope=cluster"); r.code != 401 {
		t.Errorf("no token: %d, want 401", r.code)
	}
}

func TestEventsClusterScopeNamesAGoneMemberThatHeldTheUnit(t *testing.T) {
	b := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("b", "orders/0")}}, Events: logOf("b")})
	a := &fakeNode{trees: []actors.Tree{sampleTree("a", "orders/1")}}
	a.setMembers(placement.Member{Name: "a", DebugAddr: "127.0.0.1:1"}, placement.Member{Name: "b", DebugAddr: b.Addr()})
	s := start(t, Config{Node: a, Events: logOf("a")})
	get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster") // the memory reads b's tree
	a.setMembers(placement.Member{Name: "a", DebugAddr: "127.0.0.1:1"})
	get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster") // b is gone
	got := eventsOf(t, get(t, "http://"+s.Addr()+"/debug/events?scope=cluster&unit=orders/0"))
	if len(got.Events) != 1 || got.Events[0].Kind != KindMemberGone || got.Events[0].Node != "b" ||
		got.Events[0].Unit != "orders/0" || !strings.HasPrefix(got.Events[0].Reason, GoneDied) {
		t.Errorf("events %+v, want b's member_gone for orders/0 (died)", got.Events)
	}
	if got := eventsOf(t, get(t, "http://"+s.Addr()+"/debug/events?scope=cluster&unit=orders/1")); len(got.Events) != 0 {
		t.Errorf("b never held orders/1: %+v", got.Events)
	}
}
