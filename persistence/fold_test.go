package persistence

import (
	"reflect"
	"testing"
)

// TestFold: last op wins per key, in the order keys were last touched;
// dead letters and handler messages are left out; FoldIndexes names the
// same ops.
func TestFold(t *testing.T) {
	ops := []Op{
		{Kind: OpUpsert, Key: "a", Doc: []byte(`{"v":1}`), Position: "1"},
		{Kind: OpUpsert, Key: "b", Doc: []byte(`{"v":2}`), Position: "2"},
		{Kind: OpDeadLetter, Position: "3", Reason: "bad"},
		{Kind: OpDelete, Key: "a", Position: "4"},
		{Kind: OpMessage, Key: "a", Position: "5"},
		{Kind: OpUpsert, Key: "c", Doc: []byte(`{"v":3}`), Position: "6"},
		{Kind: OpUpsert, Key: "b", Doc: []byte(`{"v":4}`), Position: "7"},
	}
	want := []Op{ops[3], ops[5], ops[6]}
	if got := Fold(ops); !reflect.DeepEqual(got, want) {
		t.Fatalf("Fold = %+v\nwant %+v", got, want)
	}
	if got := FoldIndexes(ops); !reflect.DeepEqual(got, []int{3, 5, 6}) {
		t.Fatalf("FoldIndexes = %v, want [3 5 6]", got)
	}
	if got := Fold(nil); len(got) != 0 {
		t.Fatalf("Fold(nil) = %v, want none", got)
	}
}
