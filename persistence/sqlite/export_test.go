package sqlite

// FailAfterWrites makes the next Apply fail inside its transaction after n
// write statements (a test hook for storetest's FailMidTx).
func FailAfterWrites(s *Store, n int) { s.failAfterWrites.Store(int64(n)) }

// SchemaVersion is the version this build migrates to.
func SchemaVersion() int { return schemaVersion() }

// StopCheckpointer stops s's WAL checkpointer (walcheckpoint.go), so that
// only the commits' own checkpoints run.
func StopCheckpointer(s *Store) error { return s.ckpt.close() }

// CompactJSON is the text the records upsert stores for a document.
var CompactJSON = compactJSON
