package sqlite

import (
	"database/sql"
	"time"
)

// FailAfterWrites makes the next Apply fail inside its transaction after n
// rows written (a test hook for storetest's FailMidTx).
func FailAfterWrites(s *Store, n int) { s.failAfterWrites.Store(int64(n)) }

// SchemaVersion is the version this build migrates to.
func SchemaVersion() int { return schemaVersion() }

// StopCheckpointer stops s's WAL checkpointer (walcheckpoint.go), so that
// only the commits' own checkpoints run.
func StopCheckpointer(s *Store) error { return s.ckpt.close() }

// CompactJSON is the text the records upsert stores for a document.
var CompactJSON = compactJSON

// GroupTxs is how many transactions groups without handlers began.
func GroupTxs(s *Store) int64 { return s.groupTxs.Load() }

// DB is the store's writer pool (one connection), to set a pragma on it.
func DB(s *Store) *sql.DB { return s.db }

// WALRestarts is how many checkpointer rounds found the WAL started over
// since the round before.
func WALRestarts(s *Store) int64 { return s.ckpt.restarts.Load() }

// SetCheckpointIdle sets how long the checkpointers started next wait for
// a round when no commit asks for one; the returned func restores it.
func SetCheckpointIdle(d time.Duration) (restore func()) {
	old := checkpointIdle.Swap(int64(d))
	return func() { checkpointIdle.Store(old) }
}
