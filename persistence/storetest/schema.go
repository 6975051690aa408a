package storetest

import (
	"errors"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/persistence"
)

func testMigrationsIdempotent(e *env) {
	sc := e.h.Schema
	if v := sc.Current(e.t, e.s); v != sc.Version {
		e.t.Fatalf("schema version %d after open, want %d", v, sc.Version)
	}
	l := e.acquire("orders/0", "node-1")
	e.apply(e.batch(l, upsert("a", `{"v":1}`, "1")))
	for i := range 2 {
		s2, err := sc.Reopen(e.t, e.s)
		if err != nil {
			e.t.Fatalf("reopen %d: %v", i+1, err)
		}
		if v := sc.Current(e.t, s2); v != sc.Version {
			e.t.Errorf("schema version %d after reopen, want %d", v, sc.Version)
		}
		rs, err := s2.Records(e.ctx, "orders", "", 0)
		if err != nil || len(rs) != 1 {
			e.t.Errorf("records after reopen: %v, %v; want the one written before", rs, err)
		}
		if err := s2.Close(); err != nil {
			e.t.Errorf("close: %v", err)
		}
	}
	// The first store still works alongside.
	e.apply(e.batch(l, upsert("b", `{"v":1}`, "2")))
}

func testSchemaTooNew(e *env) {
	sc := e.h.Schema
	newer := sc.Version + 1
	sc.Stamp(e.t, e.s, newer)
	s2, err := sc.Reopen(e.t, e.s)
	if err == nil {
		_ = s2.Close()
		e.t.Fatal("opening a database with a newer schema: no error")
	}
	if !errors.Is(err, persistence.ErrSchemaTooNew) {
		e.t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, strconv.Itoa(newer)) || !strings.Contains(msg, strconv.Itoa(sc.Version)) {
		e.t.Errorf("error %q does not name both versions %d and %d", msg, newer, sc.Version)
	}
	if v := sc.Current(e.t, e.s); v != newer {
		e.t.Errorf("the refused open changed the version to %d", v)
	}
}
