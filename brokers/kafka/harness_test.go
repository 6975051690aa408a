package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kafka"
)

const testTopic = "events"

// fakeCluster is an in-process Kafka (kfake, the real protocol on real TCP)
// that can be stopped and started again on the same port with its data.
type fakeCluster struct {
	dir     string
	port    int
	opts    []kfake.Opt
	mu      sync.Mutex
	c       *kfake.Cluster
	stopped bool
}

func startCluster(t *testing.T, partitions int32, opts ...kfake.Opt) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{dir: t.TempDir(), opts: opts}
	all := append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic), kfake.DataDir(fc.dir)}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	fc.c = c
	t.Cleanup(fc.close)
	_, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	if err == nil {
		fc.port, err = strconv.Atoi(port)
	}
	if err != nil {
		t.Fatalf("kfake address %s: %v", c.ListenAddrs()[0], err)
	}
	return fc
}

func (fc *fakeCluster) addr() string { return fmt.Sprintf("127.0.0.1:%d", fc.port) }

func (fc *fakeCluster) cluster() *kfake.Cluster {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.c
}

func (fc *fakeCluster) close() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if !fc.stopped {
		fc.c.Close()
		fc.stopped = true
	}
}

// start starts a new cluster on the same port from the same data.
func (fc *fakeCluster) start(t *testing.T) {
	t.Helper()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if !fc.stopped {
		return
	}
	all := append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(fc.port), kfake.DataDir(fc.dir)}, fc.opts...)
	var (
		c   *kfake.Cluster
		err error
	)
	// The port may be busy for a moment: poll with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err = kfake.NewCluster(all...); err == nil || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	if err != nil {
		t.Fatalf("restart kfake on port %d: %v", fc.port, err)
	}
	fc.c, fc.stopped = c, false
}

// streamHarness makes a fresh cluster per definition.
type streamHarness struct {
	cfg func(addr string) kafka.Config
}

func (h streamHarness) NewStream(t *testing.T, partitions int) brokertest.StreamFixture {
	fc := startCluster(t, int32(partitions))
	cl, err := kgo.NewClient(kgo.SeedBrokers(fc.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(5*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &fixture{fc: fc, cl: cl, adm: kadm.NewClient(cl), cfg: h.cfg}
}

// IgnoreGoroutines leaves out the fake broker's own goroutines: the
// connections the fixture's producer opens during a test are served by
// kfake until the fixture closes, and are not the adapter's.
func (h streamHarness) IgnoreGoroutines() []goleak.Option {
	const kfake = "github.com/twmb/franz-go/pkg/kfake."
	return []goleak.Option{
		goleak.IgnoreAnyFunction(kfake + "(*clientConn).read"),
		goleak.IgnoreAnyFunction(kfake + "(*clientConn).read.func1"),
		goleak.IgnoreAnyFunction(kfake + "(*clientConn).write"),
		goleak.IgnoreAnyFunction(kfake + "(*clientConn).write.func1"),
	}
}

type fixture struct {
	fc  *fakeCluster
	cl  *kgo.Client
	adm *kadm.Client
	cfg func(addr string) kafka.Config
}

func (f *fixture) config() kafka.Config {
	cfg := kafka.Config{Brokers: []string{f.fc.addr()}, Topic: testTopic, RequestTimeout: 3 * time.Second}
	if f.cfg != nil {
		cfg = f.cfg(f.fc.addr())
	}
	return cfg
}

func (f *fixture) Open(t *testing.T) brokers.Stream {
	s, err := kafka.New(f.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (f *fixture) Produce(ctx context.Context, partition string, msgs ...brokers.Message) ([]string, error) {
	p, err := strconv.Atoi(partition)
	if err != nil {
		return nil, err
	}
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		rec := &kgo.Record{Topic: testTopic, Partition: int32(p), Key: m.Key, Value: m.Value, Timestamp: m.Time}
		for _, h := range m.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs[i] = rec
	}
	if err := f.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, err
	}
	pos := make([]string, len(recs))
	for i, r := range recs {
		pos[i] = strconv.FormatInt(r.Offset, 10)
	}
	return pos, nil
}

func (f *fixture) AddPartitions(ctx context.Context, n int) error {
	resp, err := f.adm.CreatePartitions(ctx, n, testTopic)
	if err != nil {
		return err
	}
	return resp.Error()
}

func (f *fixture) Trim(ctx context.Context, partition, before string) error {
	p, err := strconv.Atoi(partition)
	if err != nil {
		return err
	}
	off, err := strconv.ParseInt(before, 10, 64)
	if err != nil {
		return err
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: testTopic, Partition: int32(p), At: off, LeaderEpoch: -1})
	resp, err := f.adm.DeleteRecords(ctx, os)
	if err != nil {
		return err
	}
	return resp.Error()
}

// StopServer closes the cluster; its data stays in its directory.
func (f *fixture) StopServer(t *testing.T)  { f.fc.close() }
func (f *fixture) StartServer(t *testing.T) { f.fc.start(t) }

// CutConnections makes the server close the connection of each of the next
// few requests, whichever client sends them: the reader's fetch connection
// is cut when its next fetch arrives.
func (f *fixture) CutConnections(t *testing.T) {
	c := f.fc.cluster()
	var mu sync.Mutex
	left := 3
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if left == 0 {
			return nil, nil, false
		}
		left--
		if left > 0 {
			c.KeepControl()
		}
		return nil, errors.New("connection cut by the test"), true
	})
}
