package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/internal/inject"
)

// Operation names for FailNext and Delay.
const (
	OpPartitions = "partitions" // Stream.Partitions
	OpOpen       = "open"       // Stream.Open, Queue.Open
	OpFetch      = "fetch"      // Reader.Fetch
	OpResolve    = "resolve"    // Stream.Resolve
	OpReceive    = "receive"    // Receiver.Receive
	OpAck        = "ack"        // Receiver.Ack
	OpNack       = "nack"       // Receiver.Nack
	OpExtend     = "extend"     // Receiver.Extend
	OpAny        = "any"        // matches every operation above (inject.Any)
)

func validOp(op string) bool {
	switch op {
	case OpPartitions, OpOpen, OpFetch, OpResolve, OpReceive, OpAck, OpNack, OpExtend, OpAny:
		return true
	}
	return false
}

// faults holds the injected faults of one Stream or Queue. It is guarded by
// the owner's mutex.
type faults struct {
	rules  inject.Rules             // FailNext calls not yet used up
	delays map[string]time.Duration // op -> delay
}

func (f *faults) failNext(op string, n int, err error) {
	if !validOp(op) {
		panic(fmt.Sprintf("memory: FailNext: unknown operation %q", op))
	}
	f.rules.Add(op, n, err)
}

func (f *faults) setDelay(op string, d time.Duration) {
	if !validOp(op) {
		panic(fmt.Sprintf("memory: Delay: unknown operation %q", op))
	}
	if f.delays == nil {
		f.delays = make(map[string]time.Duration)
	}
	if d <= 0 {
		delete(f.delays, op)
		return
	}
	f.delays[op] = d
}

// delay is how long a call of op waits before it runs: its own delay plus
// the "any" delay.
func (f *faults) delay(op string) time.Duration {
	return f.delays[op] + f.delays[OpAny]
}

// take uses up one failure for op, if any: the first rule, in FailNext
// order, that names op or "any".
func (f *faults) take(op string) error {
	matched, err := f.rules.Take(op)
	if matched && err == nil {
		err = &brokers.Error{Op: op, Retryable: true, Err: brokers.ErrInjected}
	}
	return err
}

func (f *faults) clear() {
	f.rules.Clear()
	f.delays = nil
}

// pause waits d through exec.Pause. It is called without the owner's lock.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return exec.Pause(ctx, d)
}

// FailNext makes the next n calls of op fail with err; nil err means a
// retryable *brokers.Error wrapping brokers.ErrInjected. op is one of the
// Op* constants; it panics on another name (a mistake in a test). A
// failure of fetch (or any) calls every Reader.Wake arrangement: a Fetch
// now returns at once, with the error.
func (s *Stream) FailNext(op string, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failNext(op, n, err)
	if n > 0 && (op == OpFetch || op == OpAny) {
		for _, p := range s.parts {
			p.callWakers()
		}
	}
}

// Delay makes every later call of op wait d (through exec.Pause) before it
// runs; d <= 0 removes the delay.
func (s *Stream) Delay(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.setDelay(op, d)
}

// ClearFaults removes every pending FailNext and Delay.
func (s *Stream) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.clear()
}

// FailNext makes the next n calls of op fail with err; nil err means a
// retryable *brokers.Error wrapping brokers.ErrInjected. op is one of the
// Op* constants; it panics on another name (a mistake in a test).
func (q *Queue) FailNext(op string, n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.failNext(op, n, err)
}

// Delay makes every later call of op wait d (through exec.Pause) before it
// runs; d <= 0 removes the delay.
func (q *Queue) Delay(op string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.setDelay(op, d)
}

// DropAcks makes the next n Ack calls report success and do nothing, so
// their messages come back after the ack deadline.
func (q *Queue) DropAcks(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropAcks += max(n, 0)
}

// ClearFaults removes every pending FailNext, Delay and DropAcks.
func (q *Queue) ClearFaults() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.clear()
	q.dropAcks = 0
}
