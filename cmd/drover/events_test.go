package main

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/cluster/debug"
)

func TestEventsURL(t *testing.T) {
	for _, tt := range []struct {
		addr    string
		cluster bool
		q       url.Values
		want    string
	}{
		{"127.0.0.1:7070", false, nil, "http://127.0.0.1:7070/debug/events"},
		{"http://h:1/debug/tree?scope=node", true, url.Values{"unit": {"orders/3"}}, "http://h:1/debug/events?scope=cluster&unit=orders%2F3"},
		{"https://proxy/x/debug", false, url.Values{"source": {"orders"}, "since": {""}, "limit": {"5"}}, "https://proxy/x/debug/events?limit=5&source=orders"},
	} {
		got, err := eventsURL(tt.addr, tt.cluster, tt.q)
		if err != nil || got != tt.want {
			t.Errorf("eventsURL(%q, %v, %v) = %q, %v; want %q", tt.addr, tt.cluster, tt.q, got, err, tt.want)
		}
	}
	if _, err := eventsURL("ftp://h", false, nil); err == nil {
		t.Error("ftp:// accepted")
	}
}

func TestWriteEventsOneLineEachEscaped(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 0, 4, 120e6, time.UTC)
	a := debug.EventsAnswer{
		Events: []events.Event{
			{Time: at, Node: "node-2", Source: "orders", Unit: "orders/3", Kind: events.KindAssigned, Members: 2},
			{Time: at.Add(time.Second), Node: "node-2", Source: "orders", Unit: "orders/3", Kind: events.KindTakeover,
				Token: 8, PrevOwner: "node-3", PrevToken: 7, Reason: "node-3 (token 7) is gone\x1b]0;pwned\x07\nsecond line"},
			{Time: at.Add(2 * time.Second), Node: "node-1", Source: "orders", Kind: events.KindControl, Action: "pause", By: "ops"},
		},
		Nodes: []debug.EventsFrom{{Node: "node-4", Error: "GET http://x/debug/events: refused"}},
	}
	var b bytes.Buffer
	writeEvents(terminalWriter{&b}, a, time.UTC)
	got := b.String()
	want := []string{
		"2026-12-02 01:00:04.120  node-2  orders/3  assigned  view of 2",
		`2026-12-02 01:00:05.120  node-2  orders/3  takeover  token 8 (from node-3, token 7)  node-3 (token 7) is gone\x1b]0;pwned\x07 second line`,
		"2026-12-02 01:00:06.120  node-1  orders    control   pause  by ops",
		"node-4 did not answer: GET http://x/debug/events: refused",
	}
	if lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n"); strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("terminal controls reached the output: %q", got)
	}
	b.Reset()
	writeEvents(terminalWriter{&b}, debug.EventsAnswer{}, time.UTC)
	if b.String() != "(no events)\n" {
		t.Errorf("empty: %q", b.String())
	}
}
