package nats

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestIncarnationsNameTheLifeThatStoredAMessage: the rule of incarnations
// on made-up stream infos, including a batch that holds the last messages
// of one life and the first of the next.
func TestIncarnationsNameTheLifeThatStoredAMessage(t *testing.T) {
	at := func(ns int64) time.Time { return time.Unix(0, ns) }
	info := func(created, last int64) *jetstream.StreamInfo {
		si := &jetstream.StreamInfo{Created: at(created)}
		if last > 0 {
			si.State.LastTime = at(last)
		}
		return si
	}
	var in incarnations
	if in.covers(1) {
		t.Fatal("nothing known yet covers a message")
	}
	if _, re := in.observe(info(100, 0)); re {
		t.Fatal("the first life seen is not a recreation")
	}
	if in.covers(101) {
		t.Fatal("an empty stream covers a message stored later")
	}
	in.observe(info(100, 150))
	if !in.covers(150) || in.covers(151) {
		t.Fatal("covered is not the last message's stamp")
	}
	prev, re := in.observe(info(200, 250))
	if !re || prev.created != 100 {
		t.Fatalf("a new creation time: recreated %v, before %d", re, prev.created)
	}
	// A late answer about the first life changes nothing.
	if _, re := in.observe(info(100, 160)); re || in.newest().created != 200 || !in.covers(250) {
		t.Fatal("an answer about an old life was taken as news")
	}
	for _, tt := range []struct {
		stamp int64
		want  string
	}{
		{120, "100"}, {199, "100"}, {200, "200"}, {240, "200"},
		{50, "100"}, // older than every known life: the oldest
	} {
		if got := in.tag(tt.stamp); got != tt.want {
			t.Errorf("tag(%d) = %s, want %s", tt.stamp, got, tt.want)
		}
	}
	for i := range maxIncarnations + 3 {
		in.observe(info(int64(300+i), 0))
	}
	if len(in.known) != maxIncarnations || in.newest().created != int64(300+maxIncarnations+2) {
		t.Fatalf("known lives: %d, newest %d", len(in.known), in.newest().created)
	}
}
