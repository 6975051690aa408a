package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// walStore opens a store in a fresh directory and takes a lease of
// big/0; put(n, from) applies one batch of bigBatches.
func walStore(t *testing.T) (s *sqlite.Store, path string, put func(n, from int)) {
	t.Helper()
	s, ls, path := leased(t, "big/0")
	batch := bigBatches(ls[0])
	put = func(n, from int) {
		t.Helper()
		if _, err := s.Apply(context.Background(), batch(n, from)); err != nil {
			t.Fatal(err)
		}
	}
	return s, path, put
}

// bigBatches makes batches of l's unit: batch(n, from) upserts n
// documents of 2 KB, keys from..from+n-1, each batch at the next position.
func bigBatches(l persistence.Lease) (batch func(n, from int) *persistence.Batch) {
	pad := strings.Repeat("x", 2000)
	pos := 0
	return func(n, from int) *persistence.Batch {
		ops := make([]persistence.Op, n)
		for i := range ops {
			pos++
			ops[i] = persistence.Op{Kind: persistence.OpUpsert, Key: "k" + strconv.Itoa(from+i), Position: strconv.Itoa(pos),
				Doc: fmt.Appendf(nil, `{"seq":%d,"pad":%q}`, pos, pad)}
		}
		return &persistence.Batch{Source: "big", Unit: l.Unit, Lease: l, Table: "big", Ops: ops, Checkpoint: strconv.Itoa(pos)}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCommitLeavesCheckpointToCheckpointer: a commit of far more than
// SQLite's default 1,000 pages of WAL does not checkpoint (the database
// file does not grow), so the batch does not wait for the copy and its
// fsync.
func TestCommitLeavesCheckpointToCheckpointer(t *testing.T) {
	s, path, put := walStore(t)
	if err := sqlite.StopCheckpointer(s); err != nil {
		t.Fatal(err)
	}
	put(10, 0) // the records table exists
	before := fileSize(t, path)
	put(3000, 0) // about 6 MB: 1,500 pages
	if after := fileSize(t, path); after != before {
		t.Errorf("database file grew from %d to %d bytes in a commit: the commit checkpointed", before, after)
	}
}

// TestCheckpointerCopiesTheWAL: with no further commit, the store's
// checkpointer copies the WAL into the database file.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	_, path, put := walStore(t)
	put(10, 0)
	before := fileSize(t, path)
	put(3000, 0) // about 6 MB
	waitFileGrows(t, path, before+4<<20, "no checkpoint after a commit of 6 MB")
}

// TestCommitStartsACheckpoint: a batch's commit asks for a round at once,
// through Apply, through a group (one transaction) and through a group
// with a handler (savepoints); the checkpointer does not wait for its idle
// interval (an hour here) to copy what the batch wrote. With rounds only
// on the interval (every 200 ms before), every round synced 10-30 MB of
// WAL at half load and the transactions beside it slowed: most of the
// latency's tail.
func TestCommitStartsACheckpoint(t *testing.T) {
	defer sqlite.SetCheckpointIdle(time.Hour)()
	for _, path := range []string{"apply", "group", "group with a handler"} {
		t.Run(path, func(t *testing.T) {
			s, ls, file := leased(t, "big/0")
			batch := bigBatches(ls[0])
			write := func(b *persistence.Batch) {
				t.Helper()
				ctx := context.Background()
				if path == "group with a handler" {
					b.Handle = func(context.Context, persistence.Tx, []persistence.Op) error { return nil }
				}
				if path == "apply" {
					if _, err := s.Apply(ctx, b); err != nil {
						t.Fatal(err)
					}
					return
				}
				if r := s.ApplyGroup(ctx, []*persistence.Batch{b}); r[0].Err != nil {
					t.Fatal(r[0].Err)
				}
			}
			write(batch(10, 0))
			before := fileSize(t, file)
			write(batch(3000, 0)) // about 6 MB
			waitFileGrows(t, file, before+4<<20, "the commit started no checkpoint")
		})
	}
}

// TestWALBoundedWithoutCheckpointer: when the checkpointer does not run,
// the writer checkpoints itself once the WAL holds the backstop's pages,
// so the WAL cannot grow without limit.
func TestWALBoundedWithoutCheckpointer(t *testing.T) {
	s, path, put := walStore(t)
	if err := sqlite.StopCheckpointer(s); err != nil {
		t.Fatal(err)
	}
	put(10, 0)
	before := fileSize(t, path)
	for i := range 22 { // 22 × 2,000 documents of 2 KB: about 90 MB of WAL frames
		put(2000, i*1000)
	}
	if after := fileSize(t, path); after <= before {
		t.Errorf("database file %d bytes after 90 MB of commits (was %d): the writer never checkpointed", after, before)
	}
	if wal := fileSize(t, path+"-wal"); wal > 80<<20 {
		t.Errorf("WAL is %d MB after 90 MB of commits, want it bounded near 64 MiB", wal>>20)
	}
}

// TestWALStartsOverBeforeTheBackstop: under a steady stream of commits
// the WAL starts over once it holds walRestartFrames (16 MiB), well before
// the writer's backstop (64 MiB): the checkpointer catches up and has the
// writer copy the last frames, instead of leaving the writer a 64 MiB
// checkpoint inside a commit. Without the catch-up the WAL only started
// over at the backstop, the file grew to 64 MiB and a commit took 30 to
// 100 ms every second or two at 30k rows/s.
func TestWALStartsOverBeforeTheBackstop(t *testing.T) {
	s, path, put := walStore(t)
	put(10, 0)
	// about 12 MB/s of WAL: 3 documents of 2 KB a millisecond, each
	// batch its own commit, as a node's groups come at half load
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(60 * time.Second)
	var biggest int64
	for i := 0; sqlite.WALRestarts(s) < 3; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL started over %d times in 60 s of commits (WAL file %d MB)", sqlite.WALRestarts(s), biggest>>20)
		}
		<-tick.C // the pace of the writer, not a wait for the checkpointer
		put(3, (i*3)%1000)
		if i%100 == 0 {
			biggest = max(biggest, fileSize(t, path+"-wal"))
		}
	}
	biggest = max(biggest, fileSize(t, path+"-wal"))
	if biggest > 40<<20 {
		t.Errorf("WAL file reached %d MB before starting over 3 times: it started over at the backstop (64 MiB), not at 16 MiB", biggest>>20)
	}
}
