package testkit

import "testing"

// Seed 1000847 (group commit drawn on, 2 groups in flight): both groups
// are held ~6 s by the "slow" queue's handler batches, so orders/1's
// batch fetched at 1.87 s (before the stream is recreated at 4.92 s) and
// its refusal splits commit one per 6 s group, until 25.7 s, long after
// RecreateQuiet (8 s). The ledger then counts those old-stream commits as
// the new stream's, and the reset that follows re-applies the new stream's
// 12..26: 15 "duplicates". With group commit off the same scenario passes.
func TestReviewSimSeed1000847(t *testing.T) {
	res, err := RandomRun(1000847, SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("%s\n%s", res.Line(), res.Explain())
	}
}

// Seed 5002409 (group commit on, 1 group in flight): jobs/slot-2's batch
// queued at 21.1 s waits behind groups held by the "slow" handler
// (6.4 s each); its unit, stopping since 21.7 s, hits StopTimeout at
// 31.7 s with the batch still in the committer, and the messages it held
// pass their ack deadline in a quiet cluster. With group commit off the
// same scenario passes.
func TestReviewSimSeed5002409(t *testing.T) {
	res, err := RandomRun(5002409, SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("%s\n%s", res.Line(), res.Explain())
	}
}
