package persistence

import (
	"fmt"
	"regexp"
	"strings"
)

// Fold applies last-op-wins per key to a batch's upserts and deletes, in
// message order: it returns, per key, the last operation, in the order the
// keys were last touched. Dead letters and handler messages are not folded.
// Stores call it after removing duplicates.
func Fold(ops []Op) []Op {
	idx := FoldIndexes(ops)
	out := make([]Op, len(idx))
	for j, i := range idx {
		out[j] = ops[i]
	}
	return out
}

// FoldIndexes is Fold without the copies: the indexes into ops of the ops
// Fold returns, in the same order.
func FoldIndexes(ops []Op) []int {
	last := make(map[string]int, len(ops))
	for i := range ops {
		if op := &ops[i]; op.Kind == OpUpsert || op.Kind == OpDelete {
			last[op.Key] = i
		}
	}
	out := make([]int, 0, len(last))
	for i := range ops {
		if op := &ops[i]; (op.Kind == OpUpsert || op.Kind == OpDelete) && last[op.Key] == i {
			out = append(out, i)
		}
	}
	return out
}

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ReservedTablePrefixes are the prefixes no records table may start with,
// in any mix of case: drover's own tables (drover_leases,
// drover_checkpoints, drover_dead_letters, drover_dedupe, drover_quality,
// drover_sources, drover_schema, drover_migrations, drover_audit, ...) and
// SQLite's internal objects (sqlite_master, sqlite_sequence, ...). Case
// does not matter because SQLite folds it: "Drover_leases" is the table
// drover_leases there.
var ReservedTablePrefixes = []string{"drover_", "sqlite_"}

// ValidTable checks a records table name: a letter or underscore, then
// letters, digits or underscores, at most 63 characters, not starting with
// a reserved prefix (ReservedTablePrefixes, compared case-insensitively).
func ValidTable(name string) error {
	if !tableRE.MatchString(name) {
		return fmt.Errorf("table name %q: must match %s", name, tableRE)
	}
	for _, p := range ReservedTablePrefixes {
		if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
			return fmt.Errorf("table name %q: the %s prefix is reserved", name, p)
		}
	}
	return nil
}
