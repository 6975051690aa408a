package actors

import (
	"context"
	"testing"
)

// An incarnation's job context lives only while a job is in flight (an
// idle unit holds none), is shared by the jobs in flight, and is cancelled
// when the incarnation ends; a job begun after the end gets a cancelled one.
func TestIncarnationContextOnlyWhileJobsRun(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	i := newIncarnation(parent)
	a, doneA := i.begin()
	b, doneB := i.begin()
	if a != b {
		t.Fatal("two jobs in flight got different contexts")
	}
	doneA()
	if a.Err() != nil || i.ctx == nil {
		t.Fatalf("the context went while a job still runs: err %v, ctx %v", a.Err(), i.ctx)
	}
	doneB()
	if i.ctx != nil || a.Err() == nil {
		t.Fatalf("no job in flight, yet the incarnation holds its context (err %v)", a.Err())
	}
	c, doneC := i.begin()
	if c.Err() != nil {
		t.Fatalf("a new job's context is cancelled: %v", c.Err())
	}
	i.end()
	if c.Err() == nil {
		t.Fatal("end did not cancel the job in flight")
	}
	doneC()
	d, doneD := i.begin()
	defer doneD()
	if d.Err() == nil {
		t.Fatal("a job begun after the end got a live context")
	}
}
