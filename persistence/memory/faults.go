package memory

import (
	"fmt"

	"github.com/drover-dev/drover/persistence"
)

// Operation names for FailNext.
const (
	OpAcquire    = "acquire"    // Acquire
	OpRenew      = "renew"      // Renew
	OpRelease    = "release"    // Release
	OpList       = "list"       // List
	OpApply      = "apply"      // Apply
	OpCheckpoint = "checkpoint" // Checkpoint, Checkpoints
	OpAny        = "any"        // every call of the Store, those above included
)

// opOther names the calls that only "any" matches: records, dead letters,
// quality windows and dedupe pruning.
const opOther = "other"

func validOp(op string) bool {
	switch op {
	case OpAcquire, OpRenew, OpRelease, OpList, OpApply, OpCheckpoint, OpAny:
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

// faults holds the injected faults. It is guarded by Store.mu.
type faults struct {
	rules       []failRule // in FailNext order
	afterCommit int        // Apply calls that commit and then fail
	down        error      // every call fails with it while set
	noFencing   bool       // Apply skips the token check
}

// FailNext makes the next n calls of op fail with err before they do
// anything (err nil: persistence.ErrInjected). op is one of the Op*
// constants; "any" matches every call. Rules are used up in FailNext order.
// It panics on an unknown op, which is a mistake in the test.
func (s *Store) FailNext(op string, n int, err error) {
	if !validOp(op) {
		panic(fmt.Sprintf("memory: FailNext: unknown operation %q", op))
	}
	if n <= 0 {
		return
	}
	if err == nil {
		err = persistence.ErrInjected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.rules = append(s.faults.rules, failRule{op: op, n: n, err: err})
}

// FailAfterCommit makes the next n Apply calls commit their batch and then
// return an error wrapping persistence.ErrInjected: the caller cannot tell
// whether the batch was written, as after a connection lost during COMMIT.
func (s *Store) FailAfterCommit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.afterCommit = max(n, 0)
}

// SetDown makes every call fail with err, before doing anything, until
// SetDown(nil): the database is unreachable.
func (s *Store) SetDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.down = err
}

// BreakFencing(true) makes Apply skip its lease token check. It exists to
// prove that a test or simulation notices broken fencing; never set it
// otherwise.
func (s *Store) BreakFencing(broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.noFencing = broken
}

// inject returns the error a call of op must fail with, if any, using up one
// FailNext failure. The caller holds s.mu.
func (f *faults) inject(op string) error {
	if f.down != nil {
		return f.down
	}
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
		return err
	}
	return nil
}
