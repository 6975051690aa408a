package sqlite

import (
	"bytes"
	"database/sql/driver"
	"unsafe"

	msqlite "modernc.org/sqlite"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Go functions the store's statements call inside SQLite (modernc's
// RegisterFunction; registered once, for every connection of the
// process): each lets one statement decide what a read and a compare in
// Go decided before, a query less per row or per batch.

// sameJSONFunc is the SQL function the records upsert calls to leave a
// stored document that equals the new one unwritten:
// drover_same_json(stored, new) is 1 when the two texts are the same JSON
// value as jsonb compares them (persistence.JSONEqualValid), 0 otherwise.
//
// Comparing inside the upsert spares reading every stored document of a
// batch back first (a query per batch and a row per key: about a fifth of
// the store's CPU per row in small batches). The new text passed the
// store's JSON check, or the decoder's (persistence.Op.DocChecked); the
// stored one is what the store wrote, or, written
// there by something else, not JSON at all: such a text compares as
// different, so that the new document replaces it rather than failing
// the batch for ever (JSONEqualValid does not check its inputs, so a
// stored text it finds equal to the new one without being the same bytes
// is checked before it is called the same: a rare case, costly only then).
const sameJSONFunc = "drover_same_json"

// positionCmpFunc is the SQL function the checkpoint's upsert calls to
// move a checkpoint forward only: drover_position_cmp(a, b) is -1, 0 or 1
// as brokers.ComparePositions orders the two positions (by value, not as
// text: "10" is after "9").
const positionCmpFunc = "drover_position_cmp"

func init() {
	msqlite.MustRegisterFunction(positionCmpFunc, &msqlite.FunctionImpl{
		NArgs:         2,
		Deterministic: true,
		VolatileArgs:  true, // compared during the call only
		Scalar: func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			a, _ := args[0].(string)
			b, _ := args[1].(string)
			return int64(brokers.ComparePositions(a, b)), nil
		},
	})
	msqlite.MustRegisterFunction(sameJSONFunc, &msqlite.FunctionImpl{
		NArgs:         2,
		Deterministic: true,
		// The texts are only read during the call (the compare copies what
		// it keeps): no copy of either per row.
		VolatileArgs: true,
		Scalar: func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			stored, doc := argBytes(args[0]), argBytes(args[1])
			if stored == nil || doc == nil {
				return false, nil // not a text: different
			}
			same, err := persistence.JSONEqualValid(stored, doc)
			if err != nil || !same {
				return false, nil
			}
			return bytes.Equal(stored, doc) || persistence.CheckJSON(stored) == nil, nil
		},
	})
}

// argBytes is a function argument's text or blob as bytes (no copy: the
// bytes are SQLite's, valid during the call only); nil for anything else.
func argBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case string:
		if x == "" {
			return []byte{}
		}
		return unsafe.Slice(unsafe.StringData(x), len(x))
	case []byte:
		return x
	}
	return nil
}
