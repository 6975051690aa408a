package sqlite

import (
	"errors"
	"fmt"
	"testing"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/drover-dev/drover/persistence"
)

// Issue 10 item 7: SQLite refusals of what a statement writes are
// permanent; BUSY and LOCKED, and everything else, are not.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name            string
		code            int
		permanent, busy bool
	}{
		{"constraint", sqlite3.SQLITE_CONSTRAINT, true, false},
		{"check", sqlite3.SQLITE_CONSTRAINT_CHECK, true, false},
		{"unique", sqlite3.SQLITE_CONSTRAINT_UNIQUE, true, false},
		{"not null", sqlite3.SQLITE_CONSTRAINT_NOTNULL, true, false},
		{"trigger", sqlite3.SQLITE_CONSTRAINT_TRIGGER, true, false},
		{"datatype", sqlite3.SQLITE_MISMATCH, true, false},
		{"too big", sqlite3.SQLITE_TOOBIG, true, false},
		{"busy", sqlite3.SQLITE_BUSY, false, true},
		{"busy snapshot", sqlite3.SQLITE_BUSY_SNAPSHOT, false, true},
		{"locked", sqlite3.SQLITE_LOCKED, false, true},
		{"io", sqlite3.SQLITE_IOERR, false, false},
		{"full", sqlite3.SQLITE_FULL, false, false},
		{"error", sqlite3.SQLITE_ERROR, false, false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("apply orders/0: %w", &dbError{code: tt.code, msg: tt.name})
		if got := persistence.Permanent(err); got != tt.permanent {
			t.Errorf("%s (%d): permanent %v, want %v", tt.name, tt.code, got, tt.permanent)
		}
		if got := errors.Is(err, persistence.ErrBusy); got != tt.busy {
			t.Errorf("%s (%d): busy %v, want %v", tt.name, tt.code, got, tt.busy)
		}
	}
}
