package memory

import (
	"encoding/json"
	"fmt"

	"github.com/drover-dev/drover/internal/inject"
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
	OpControls   = "controls"   // SetControl, ListControls, WriteAudit, ListAudit
	OpAny        = "any"        // every call of the Store, those above included (inject.Any)
)

// opOther names the calls that only "any" matches: records, dead letters,
// quality windows and dedupe pruning.
const opOther = "other"

func validOp(op string) bool {
	switch op {
	case OpAcquire, OpRenew, OpRelease, OpList, OpApply, OpCheckpoint, OpControls, OpAny:
		return true
	}
	return false
}

// faults holds the injected faults. It is guarded by Store.mu.
type faults struct {
	rules       inject.Rules      // FailNext calls not yet used up
	afterCommit int               // Apply calls that commit and then fail
	down        error             // every call fails with it while set
	noFencing   bool              // Apply skips the token check
	refused     map[string]string // table -> the top-level member its documents must not have
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
	s.faults.rules.Add(op, n, err)
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

// Refuse makes the store refuse every document written to table (upserts
// and handler Puts) that has a top-level member named field, as a CHECK
// constraint (doc->>'field' IS NULL) would: the batch fails with an error
// matching persistence.ErrPermanent and writes nothing. An unchanged
// document is not written, so it is not refused. Refuse(table, "") lifts
// it.
func (s *Store) Refuse(table, field string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if field == "" {
		delete(s.faults.refused, table)
		return
	}
	if s.faults.refused == nil {
		s.faults.refused = map[string]string{}
	}
	s.faults.refused[table] = field
}

// refuse returns the error a write of doc to table fails with under
// Refuse. The caller holds s.mu.
func (f *faults) refuse(table string, doc []byte) error {
	field, ok := f.refused[table]
	if !ok {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(doc, &obj) != nil {
		return nil
	}
	if v, has := obj[field]; has && string(v) != "null" {
		return persistence.Refused(fmt.Errorf("document violates the check constraint of %s: member %q not allowed", table, field))
	}
	return nil
}

// inject returns the error a call of op must fail with, if any, using up one
// FailNext failure. The caller holds s.mu.
func (f *faults) inject(op string) error {
	if f.down != nil {
		return f.down
	}
	_, err := f.rules.Take(op)
	return err
}
