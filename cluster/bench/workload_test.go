package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestValueText pins the text of a message: an order whose fields are
// numbers zero-padded where the format says, padded with x to the payload
// size, and valid JSON.
func TestValueText(t *testing.T) {
	w := newWorkload(12, 1000, 100_000, 160)
	got := string(w.value(1_234_507))
	prefix := `{"id":34507,"seq":1234507,"customer":"customer-034507","status":"paid","total":977.07,"currency":"EUR","pad":"`
	want := prefix + strings.Repeat("x", 160-len(prefix)-2) + `"}`
	if got != want {
		t.Fatalf("value:\n got %s\nwant %s", got, want)
	}
	if len(got) != 160 || !json.Valid([]byte(got)) {
		t.Fatalf("value is %d bytes (want 160), valid JSON: %v", len(got), json.Valid([]byte(got)))
	}
}
