package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// Issue 10 item 7: the SQLSTATE classes that refuse what a batch holds are
// permanent; the others, which may pass on a retry, are not.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		code      string
		permanent bool
	}{
		{"22P02", true},  // invalid_text_representation (bad jsonb)
		{"22003", true},  // numeric_value_out_of_range
		{"22021", true},  // character_not_in_repertoire
		{"23514", true},  // check_violation
		{"23505", true},  // unique_violation
		{"23502", true},  // not_null_violation
		{"23503", true},  // foreign_key_violation
		{"42601", true},  // syntax_error
		{"42703", true},  // undefined_column
		{"42804", true},  // datatype_mismatch
		{"54000", true},  // program_limit_exceeded
		{"42501", false}, // insufficient_privilege: a GRANT fixes it
		{"42P01", false}, // undefined_table: the store creates it again
		{"08006", false}, // connection_failure
		{"08P01", false}, // protocol_violation
		{"40001", false}, // serialization_failure
		{"40P01", false}, // deadlock_detected
		{"53300", false}, // too_many_connections
		{"57014", false}, // query_canceled (statement_timeout)
		{"57P01", false}, // admin_shutdown
		{"55P03", false}, // lock_not_available
		{"25P02", false}, // in_failed_sql_transaction
		{"XX000", false}, // internal_error
		{"P0001", false}, // raise_exception
		{"DR001", false}, // drover_fence: lease lost
		{"", false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("apply orders/0: upsert into orders: %w", &Error{Code: tt.code, Message: "m"})
		if got := errors.Is(err, persistence.ErrPermanent); got != tt.permanent {
			t.Errorf("SQLSTATE %q: permanent %v, want %v", tt.code, got, tt.permanent)
		}
		if got := persistence.Permanent(err); got != tt.permanent {
			t.Errorf("SQLSTATE %q: persistence.Permanent %v, want %v", tt.code, got, tt.permanent)
		}
		if busy := errors.Is(err, persistence.ErrBusy); busy != (tt.code == "55P03") {
			t.Errorf("SQLSTATE %q: busy %v", tt.code, busy)
		}
	}
	if persistence.Permanent(&driverError{msg: "connection refused"}) {
		t.Error("a driver error (connection refused) is permanent")
	}
}
