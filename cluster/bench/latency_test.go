package bench

import (
	"testing"
	"time"
)

// A message the node applied before its producer heard back is measured
// against the first poll that found it applied, not the later poll at
// which its offset became known: the late ack is the producer's, not the
// node's.
func TestCoverageMeasuresAgainstTheFirstPollThatCoveredAMessage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pub := &published{base: []int64{10, 0}, ts: make([][]time.Time, 2)}
	cov := newCoverage(2)
	var lats []time.Duration

	pub.add(0, 10, at(0)) // acknowledged at once
	// offset 11 was published at 1 ms, its ack is late; offset 12 not yet published
	pub.ts[0] = append(pub.ts[0], time.Time{})
	cov.observe(0, 11, at(5)) // the poll at 5 ms finds 10 and 11 applied
	cov.measure(pub, &lats)
	if len(lats) != 1 || lats[0] != 5*time.Millisecond {
		t.Fatalf("after the first poll: %v, want [5ms] (offset 10 only: 11's timestamp is not known yet)", lats)
	}
	pub.add(0, 11, at(1)) // the late ack
	pub.add(0, 12, at(6))
	pub.add(1, 0, at(7))
	cov.observe(0, 11, at(10)) // unchanged: no new mark
	cov.observe(1, -1, at(10)) // a start marker covers nothing
	cov.measure(pub, &lats)
	if len(lats) != 2 || lats[1] != 4*time.Millisecond {
		t.Fatalf("after the ack: %v, want [5ms 4ms] (offset 11: published at 1 ms, covered by the poll at 5 ms)", lats)
	}
	cov.observe(0, 12, at(15))
	cov.observe(1, 0, at(15))
	cov.measure(pub, &lats)
	if len(lats) != 4 || lats[2] != 9*time.Millisecond || lats[3] != 8*time.Millisecond {
		t.Fatalf("after the third poll: %v, want [5ms 4ms 9ms 8ms]", lats)
	}
	if n := len(cov.marks[0]); n != 1 {
		t.Errorf("partition 0 keeps %d marks, want 1 (the ones behind every measured message are dropped)", n)
	}
}
