package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/exec"
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
	OpAny        = "any"        // matches every operation above
)

func validOp(op string) bool {
	switch op {
	case OpPartitions, OpOpen, OpFetch, OpResolve, OpReceive, OpAck, OpNack, OpExtend, OpAny:
		return true
	}
	return false
}

// failRule is one FailNext call not yet used up.
type failRule struct {
	op  string
	n   int
	err error
}

// faults holds the injected faults of one Stream or Queue. It is guarded by
// the owner's mutex.
type faults struct {
	rules  []failRule               // in FailNext order
	delays map[string]time.Duration // op -> delay
}

func (f *faults) failNext(op string, n int, err error) {
	if !validOp(op) {
		panic(fmt.Sprintf("memory: FailNext: unknown operation %q", op))
	}
	if n <= 0 {
		return
	}
	f.rules = append(f.rules, failRule{op: op, n: n, err: err})
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
	for i := range f.rules {
		r := &f.rules[i]
		if r.op != op && r.op != OpAny {
			continue
		}
		r.n--
		err := r.err
		if r.n == 0 {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
		}
		if err == nil {
			err = &brokers.Error{Op: op, Retryable: true, Err: brokers.ErrInjected}
		}
		return err
	}
	return nil
}

func (f *faults) clear() {
	f.rules = nil
	f.delays = nil
}

// pause waits d through exec.Pause. It is called without the owner's lock.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return exec.Pause(ctx, d)
}
