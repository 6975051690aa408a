package storetest

import (
	"fmt"
	"slices"
	"sync"
)

func (e *env) initSource(source string, units []string) []string {
	e.t.Helper()
	got, err := e.s.InitSource(e.ctx, source, units)
	if err != nil {
		e.t.Fatalf("init source %s with %v: %v", source, units, err)
	}
	return got
}

func testInitSourceFirstWins(e *env) {
	given := []string{"orders/2", "orders/10", "orders/0", "orders/2"}
	kept := slices.Clone(given)
	want := []string{"orders/0", "orders/10", "orders/2"} // sorted bytewise, once each
	if got := e.initSource("orders", given); !slices.Equal(got, want) {
		e.t.Errorf("first call: %v, want %v", got, want)
	}
	if !slices.Equal(given, kept) {
		e.t.Errorf("InitSource modified its argument: %v, was %v", given, kept)
	}
	if got := e.initSource("orders", []string{"orders/0", "orders/1", "orders/2", "orders/3"}); !slices.Equal(got, want) {
		e.t.Errorf("a later call with more units: %v, want the first %v", got, want)
	}
	// Sources are independent; an empty first answer is an answer too.
	if got := e.initSource("jobs", nil); got == nil || len(got) != 0 {
		e.t.Errorf("first call with no units: %#v, want an empty, non-nil list", got)
	}
	if got := e.initSource("jobs", []string{"jobs/slot-0"}); len(got) != 0 {
		e.t.Errorf("a later call after an empty first: %v, want []", got)
	}
	if got := e.initSource("orders", nil); !slices.Equal(got, want) {
		e.t.Errorf("a later call with no units: %v, want %v", got, want)
	}
	if _, err := e.s.InitSource(e.ctx, "", []string{"x/0"}); err == nil {
		e.t.Error("an empty source name: no error")
	}
}

func testInitSourceConcurrent(e *env) {
	const callers = 8 // one-digit unit numbers: bytewise order is numeric order
	answers := make([][]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			units := make([]string, 0, i+1)
			for u := i; u >= 0; u-- {
				units = append(units, fmt.Sprintf("race/%d", u))
			}
			answers[i], errs[i] = e.s.InitSource(e.ctx, "race", units)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("caller %d: %v", i, err)
		}
	}
	first := answers[0]
	if len(first) == 0 || !slices.IsSorted(first) {
		e.t.Fatalf("caller 0 got %v, want one caller's units, sorted", first)
	}
	for i, a := range answers {
		if !slices.Equal(a, first) {
			e.t.Errorf("caller %d got %v, caller 0 got %v: concurrent callers must agree", i, a, first)
		}
	}
	// The answer is one caller's list: race/0 .. race/(n-1) for some n.
	for j, u := range first {
		if u != fmt.Sprintf("race/%d", j) {
			e.t.Errorf("recorded %v is no caller's list", first)
			break
		}
	}
	if got := e.initSource("race", []string{"late/0"}); !slices.Equal(got, first) {
		e.t.Errorf("a later caller got %v, want %v", got, first)
	}
}
