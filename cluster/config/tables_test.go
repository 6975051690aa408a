package config

import (
	"strings"
	"testing"
)

// Issue 10, item 9: a UTF-8 byte order mark (as some editors write) became
// part of the first key: "\ufeffnode: unknown field".
func TestByteOrderMarkIsNotPartOfTheFirstKey(t *testing.T) {
	c, errs := parse(t, "\xef\xbb\xbfnode: {name: bom}\n"+src)
	if errs != nil {
		t.Fatalf("a config starting with a BOM: %v", errs)
	}
	if c.Node.Name != "bom" {
		t.Errorf("node.name = %q, want bom", c.Node.Name)
	}
}

// Issue 10, item 8: names of drover's and SQLite's own tables in any case,
// and two tables that differ only in case, are refused by check.
func TestReservedAndCaseFoldedTableNames(t *testing.T) {
	for _, table := range []string{"Drover_leases", "DROVER_CHECKPOINTS", "dRoVeR_dedupe", "drover_schema", "drover_migrations",
		"sqlite_master", "SQLite_sequence", "SQLITE_x"} {
		_, errs := parse(t, src+"    records: {table: "+table+"}\n")
		if errs == nil {
			t.Errorf("records.table %s: accepted", table)
			continue
		}
		if got := errs.Error(); !strings.Contains(got, "sources[0].records.table:") || !strings.Contains(got, "prefix is reserved") {
			t.Errorf("records.table %s: %v", table, got)
		}
	}

	two := func(a, b string) string {
		return "sources:\n" +
			"  - {name: a, type: memory, memory: {}, records: {table: " + a + "}}\n" +
			"  - {name: b, type: memory, memory: {}, records: {table: " + b + "}}\n"
	}
	_, errs := parse(t, two("orders", "Orders"))
	if len(errs) != 1 {
		t.Fatalf("orders and Orders: %v, want one error", errs)
	}
	want := `sources[1].records.table: "Orders" and sources[0].records.table "orders" differ only in case`
	if !strings.Contains(errs.Error(), want) {
		t.Errorf("got %q, want it to contain %q", errs.Error(), want)
	}
	// One spelling for both is one table on every store: still accepted.
	if _, errs := parse(t, two("orders", "orders")); errs != nil {
		t.Errorf("two sources into one table: %v", errs)
	}
	// A handler source has no table; the default of a records source is
	// its name, which is lower case.
	if _, errs := parse(t, "sources:\n  - {name: orders, type: memory, memory: {}}\n  - {name: b, type: memory, memory: {}, mode: handler, handler_name: h}\n"); errs != nil {
		t.Errorf("%v", errs)
	}
}
