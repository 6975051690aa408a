package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failingDB writes nothing: every write fails with err.
type failingDB struct {
	db
	err error
}

func (f failingDB) write(context.Context, string, string, *sqlBatch) error { return f.err }

// The loop reports why it stopped: a writer's failure (at once, not at the
// time limit) and not the cancellation it caused; its own decode error
// and not the writers' cancellation.
func TestLoopReportsWhyItStopped(t *testing.T) {
	w := newWorkload(2, 200, 50, 200)
	k, err := startKafka(t.Context(), w, "bench_loop")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	e := loopEnv(t)
	boom := errors.New("disk full")
	e.db = failingDB{db: e.db, err: boom}
	start := time.Now()
	_, err = e.runLoop(t.Context(), k.ListenAddrs()[0], w, io.Discard)
	if !errors.Is(err, boom) {
		t.Errorf("loop with failing writes: %v, want the writers' failure %v", err, boom)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the loop took %s to stop after its writers failed", took)
	}

	// a body the loop cannot decode: its own error wins
	e = loopEnv(t)
	bad := newWorkload(1, 1, 1, 200)
	k2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "bench_loop"))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k2.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "bench_loop", Partition: 0, Key: []byte("0"), Value: []byte("not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_, err = e.runLoop(t.Context(), k2.ListenAddrs()[0], bad, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "decode") {
		t.Errorf("loop over a bad body: %v, want its decode error", err)
	}
}

// loopEnv is an env on a fresh SQLite file, small batches.
func loopEnv(t *testing.T) *env {
	t.Helper()
	e, err := newEnv(t.Context(), Options{Batch: 10, MaxWait: 50 * time.Millisecond, CeilingWorkers: 2}.withDefaults(),
		"sqlite:"+t.TempDir()+"/b.db", "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}
