package node

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
)

// AuditTable is where the built-in "audit" handler writes.
const AuditTable = "drover_audit"

// AuditHandler is the built-in handler registered as "audit": it records
// every message it is given — source, unit, position, the applying node and
// its fencing token — in drover_audit, inside the batch's fenced
// transaction. A message applied twice shows as two rows; a message never
// applied has none. The demo and the multi-process tests read it to count
// lost and duplicated messages exactly. SQL stores only.
func AuditHandler(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+AuditTable+` (
		source text NOT NULL, unit text NOT NULL, position text NOT NULL,
		node text NOT NULL, token bigint NOT NULL)`); err != nil {
		return fmt.Errorf("audit: create table: %w", err)
	}
	const per = 5
	for start := 0; start < len(b.Messages); start += 200 {
		end := min(start+200, len(b.Messages))
		var q strings.Builder
		q.WriteString("INSERT INTO " + AuditTable + " (source, unit, position, node, token) VALUES ")
		args := make([]any, 0, (end-start)*per)
		for i, m := range b.Messages[start:end] {
			if i > 0 {
				q.WriteByte(',')
			}
			n := i * per
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5)
			args = append(args, b.Source, b.Unit, m.Position, b.Node, b.Token)
		}
		if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("audit: insert: %w", err)
		}
	}
	return nil
}
