package persistence

import (
	"fmt"
	"regexp"
)

// Fold applies last-op-wins per key to a batch's upserts and deletes, in
// message order: it returns, per key, the last operation, in the order the
// keys were last touched. Dead letters and handler messages are not folded.
// Stores call it after removing duplicates.
func Fold(ops []Op) []Op {
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		if op.Kind == OpUpsert || op.Kind == OpDelete {
			last[op.Key] = i
		}
	}
	out := make([]Op, 0, len(last))
	for i, op := range ops {
		if (op.Kind == OpUpsert || op.Kind == OpDelete) && last[op.Key] == i {
			out = append(out, op)
		}
	}
	return out
}

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ValidTable checks a records table name: a letter or underscore, then
// letters, digits or underscores, at most 63 characters, not starting with
// "drover_" (drover's own tables).
func ValidTable(name string) error {
	if !tableRE.MatchString(name) {
		return fmt.Errorf("table name %q: must match %s", name, tableRE)
	}
	if len(name) >= 7 && (name[:7] == "drover_" || name[:7] == "DROVER_") {
		return fmt.Errorf("table name %q: the drover_ prefix is reserved", name)
	}
	return nil
}
