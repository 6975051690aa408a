package inject

import (
	"errors"
	"testing"
)

func TestRulesUsedUpInAddOrder(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	var r Rules
	r.Add("fetch", 0, errA) // adds nothing
	r.Add("fetch", 2, errA)
	r.Add(Any, 1, errB)
	r.Add("open", 1, nil)
	for i, c := range []struct {
		op      string
		matched bool
		err     error
	}{
		{"open", true, errB}, // the "any" rule comes before the "open" one
		{"fetch", true, errA},
		{"fetch", true, errA},
		{"fetch", false, nil},
		{"open", true, nil},
		{"open", false, nil},
	} {
		matched, err := r.Take(c.op)
		if matched != c.matched || err != c.err {
			t.Fatalf("take %d (%s) = %v, %v; want %v, %v", i, c.op, matched, err, c.matched, c.err)
		}
	}
	r.Add("open", 3, errA)
	r.Clear()
	if matched, _ := r.Take("open"); matched {
		t.Fatal("a rule is left after Clear")
	}
}
