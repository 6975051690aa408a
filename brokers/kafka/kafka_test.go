package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/internal/syncbuf"
)

func TestConfigValidate(t *testing.T) {
	good := func() kafka.Config {
		return kafka.Config{Brokers: []string{"127.0.0.1:9092", "kafka-1.example:9093", "[::1]:9092"}, Topic: "t"}
	}
	tests := []struct {
		name   string
		modify func(*kafka.Config)
		want   string // substring of the error; "" = valid
	}{
		{"good", func(*kafka.Config) {}, ""},
		{"sasl scram", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "SCRAM-SHA-512", User: "u", Password: "p"} }, ""},
		{"tls", func(c *kafka.Config) { c.TLS = kafka.TLS{Enable: true, CertFile: "c", KeyFile: "k"} }, ""},
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }, "brokers: required"},
		{"scheme", func(c *kafka.Config) { c.Brokers[1] = "kafka://h:9092" }, `brokers[1]: "kafka://h:9092" must be host:port, without a URL scheme`},
		{"no port", func(c *kafka.Config) { c.Brokers[0] = "localhost" }, `brokers[0]: "localhost" must be host:port`},
		{"bad port", func(c *kafka.Config) { c.Brokers[0] = "h:99999" }, `brokers[0]: "h:99999": port "99999"`},
		{"empty host", func(c *kafka.Config) { c.Brokers[2] = ":9092" }, `brokers[2]: ":9092": host is missing`},
		{"path", func(c *kafka.Config) { c.Brokers[0] = "h:9092/x" }, `brokers[0]: "h:9092/x": port "9092/x" must be a number`},
		{"credentials", func(c *kafka.Config) { c.Brokers[0] = "u:p@h:9092" }, `brokers[0]`},
		{"tab in host", func(c *kafka.Config) { c.Brokers[0] = "ho\tst:9092" }, `brokers[0]: "ho\tst:9092": "ho\tst" is not a host name or IP address`},
		{"no topic", func(c *kafka.Config) { c.Topic = " " }, "topic: required"},
		{"mechanism", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "gssapi", User: "u"} }, `sasl.mechanism: must be one of plain, scram-sha-256, scram-sha-512, not "gssapi"`},
		{"no user", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "plain"} }, "sasl.username: required"},
		{"cert without key", func(c *kafka.Config) { c.TLS = kafka.TLS{Enable: true, CertFile: "c"} }, "cert_file and key_file"},
		{"tls files while off", func(c *kafka.Config) { c.TLS = kafka.TLS{CAFile: "ca"} }, "tls.enabled: must be true when other tls settings are given"},
		{"fetch bytes", func(c *kafka.Config) { c.FetchMaxBytes = -1 }, "fetch_max_bytes"},
		{"partition bytes", func(c *kafka.Config) { c.FetchMaxPartitionBytes = -1 }, "fetch_max_partition_bytes"},
		{"timeout", func(c *kafka.Config) { c.RequestTimeout = -time.Second }, "request_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("valid config rejected: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if tt.want != "" {
				if _, nerr := kafka.New(c); nerr == nil {
					t.Fatal("New accepted an invalid config")
				}
			}
		})
	}
}

func TestTLSFilesChecked(t *testing.T) {
	dir := t.TempDir()
	_, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", TLS: kafka.TLS{Enable: true, CAFile: dir + "/missing.pem"}})
	if err == nil || !strings.Contains(err.Error(), "tls.ca_file") {
		t.Fatalf("missing CA file: %v", err)
	}
}

func TestSASLPasswordNeverLogged(t *testing.T) {
	const (
		user     = "drover"
		password = "pw-9f2c1e-never-in-logs"
		wrong    = "pw-wrong-5a7d-never-in-logs"
	)
	for _, mech := range []struct{ kfake, drover string }{{"PLAIN", kafka.MechanismPlain}, {"SCRAM-SHA-256", kafka.MechanismSCRAMSHA256}} {
		t.Run(mech.drover, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic), kfake.EnableSASL(), kfake.Superuser(mech.kfake, user, password))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addr := c.ListenAddrs()[0]
			var logs syncbuf.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := kafka.Config{
				Brokers: []string{addr}, Topic: testTopic, Logger: logger, RequestTimeout: 3 * time.Second,
				SASL: kafka.SASL{Mechanism: mech.drover, User: user, Password: password}, CommitToGroup: "lag",
			}
			s, err := kafka.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Partitions(ctx); err != nil {
				t.Fatalf("partitions with the right password: %v", err)
			}
			produceAuth(t, addr, mech.kfake, user, password, &kgo.Record{Topic: testTopic, Value: []byte("v")})
			r, err := s.Open(ctx, "0", brokers.Start{})
			if err != nil {
				t.Fatal(err)
			}
			res := fetchOne(t, r)
			if err := s.Committed(ctx, "0", res.Messages[0].Position); err != nil {
				t.Fatalf("committed: %v", err)
			}
			logger.Info("config", "sasl", cfg.SASL)
			_ = s.Close()

			bad := cfg
			bad.SASL.Password = wrong
			s2, err := kafka.New(bad)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s2.Partitions(ctx)
			_ = s2.Close()
			if err == nil {
				t.Fatal("partitions with a wrong password succeeded")
			}
			// kfake drops the connection on a failed authentication (EOF)
			// instead of answering SASL_AUTHENTICATION_FAILED, so the
			// classification of that answer is pinned in TestTranslate.
			t.Logf("wrong password: %v (retryable %v)", err, brokers.Retryable(err))
			printed := fmt.Sprintf("%v %+v %#v %s %v", cfg, cfg, cfg, cfg.SASL, err)
			for _, pw := range []string{password, wrong} {
				if strings.Contains(logs.String(), pw) {
					t.Fatalf("password in the logs:\n%s", logs.String())
				}
				if strings.Contains(printed, pw) {
					t.Fatalf("password printed: %s", printed)
				}
			}
			if !strings.Contains(logs.String(), "level=DEBUG") {
				t.Fatal("nothing was logged at debug: the check proves nothing")
			}
		})
	}
}

func produceAuth(t *testing.T, addr, mech, user, pass string, recs ...*kgo.Record) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr)}
	if mech == "PLAIN" {
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	} else {
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func fetchOne(t *testing.T, r brokers.Reader) brokers.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		res, err := r.Fetch(ctx, 100, time.Second)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(res.Messages) > 0 {
			return res
		}
	}
}

func newTestStream(t *testing.T, fc *fakeCluster, group string) *kafka.Stream {
	t.Helper()
	return newStreamOf(t, fc, kafka.Config{CommitToGroup: group})
}

// newStreamOf is a stream of cfg on fc's brokers and the test topic, with
// a 3 s request timeout, closed when the test ends.
func newStreamOf(t *testing.T, fc *fakeCluster, cfg kafka.Config) *kafka.Stream {
	t.Helper()
	cfg.Brokers, cfg.Topic, cfg.RequestTimeout = []string{fc.addr()}, testTopic, 3*time.Second
	s, err := kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openEarliest opens partition 0 of s at its oldest message.
func openEarliest(t *testing.T, s brokers.Stream) brokers.Reader {
	t.Helper()
	r, err := s.Open(brokertest.Context(t, 10*time.Second), "0", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTombstoneKeysAndLag(t *testing.T) {
	f := streamHarness{}.NewStream(t, 1).(*fixture)
	ctx := context.Background()
	recs := []*kgo.Record{
		{Topic: testTopic, Key: []byte("gone"), Value: nil},
		{Topic: testTopic, Key: nil, Value: nil},
		{Topic: testTopic, Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(1700000000123)},
	}
	for range 7 {
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: []byte("x")})
	}
	if err := f.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := newTestStream(t, f.fc, "")
	r, err := s.Open(ctx, "0", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var got []brokers.Message
	var last brokers.Result
	for len(got) < 3 {
		last = fetchOne(t, readerMax{r, 3 - len(got)})
		got = append(got, last.Messages...)
	}
	if !got[0].Tombstone || string(got[0].Key) != "gone" {
		t.Fatalf("keyed null value = %+v, want a tombstone", got[0])
	}
	if got[1].Tombstone {
		t.Fatalf("keyless null value = %+v, want no tombstone", got[1])
	}
	if got[2].Tombstone || !got[2].Time.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("record = %+v", got[2])
	}
	if last.Lag != 7 {
		t.Fatalf("lag after 3 of 10 = %d, want 7", last.Lag)
	}
}

// readerMax caps a reader's fetch size.
type readerMax struct {
	brokers.Reader
	max int
}

func (r readerMax) Fetch(ctx context.Context, _ int, wait time.Duration) (brokers.Result, error) {
	return r.Reader.Fetch(ctx, r.max, wait)
}

func TestCommittedToGroup(t *testing.T) {
	fc := startCluster(t, 2)
	ctx := context.Background()
	s := newTestStream(t, fc, "drover-orders")
	if err := s.Committed(ctx, "1", "41"); err != nil {
		t.Fatalf("committed: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(fc.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "drover-orders")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(testTopic, 1)
	if !ok || o.Err != nil || o.At != 42 {
		t.Fatalf("group offset = %+v (found %v), want 42", o, ok)
	}
	for _, bad := range [][2]string{{"x", "1"}, {"1", "x"}} {
		if err := s.Committed(ctx, bad[0], bad[1]); err == nil || brokers.Retryable(err) {
			t.Fatalf("Committed(%q, %q) = %v, want a non-retryable error", bad[0], bad[1], err)
		}
	}
	plain := newTestStream(t, fc, "")
	if err := plain.Committed(ctx, "0", "1"); err == nil || brokers.Retryable(err) {
		t.Fatalf("Committed without a group = %v, want a non-retryable error", err)
	}
}

func TestOpenBadPositionAndClosed(t *testing.T) {
	fc := startCluster(t, 1)
	ctx := context.Background()
	s := newTestStream(t, fc, "")
	if _, err := s.Open(ctx, "0", brokers.Start{After: "abc"}); err == nil || brokers.Retryable(err) {
		t.Fatalf("open after a non-offset: %v", err)
	}
	if _, err := s.Open(ctx, "0", brokers.Start{After: "5"}); !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) {
		t.Fatalf("open after a position beyond the end: %v, want non-retryable ErrPositionUnknown", err)
	}
	_ = s.Close()
	if err := s.Committed(ctx, "0", "1"); err == nil {
		t.Fatal("commit after close succeeded")
	}
}

// Lag counts records to the LSO; Oldest is the timestamp of the next
// record when the client has it buffered, and not set at the end.
func TestLagAndOldestFromRecordTimestamps(t *testing.T) {
	f := streamHarness{}.NewStream(t, 1).(*fixture)
	ctx := context.Background()
	t0 := time.UnixMilli(1700000000000)
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: []byte("x"), Timestamp: t0.Add(time.Duration(i) * time.Second)})
	}
	if err := f.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := openEarliest(t, newTestStream(t, f.fc, ""))
	var got []brokers.Message
	dated := 0
	for len(got) < 6 {
		res := fetchOne(t, readerMax{r, 2})
		if !res.Oldest.IsZero() {
			dated++
		}
		got = append(got, res.Messages...)
		n := len(got)
		if res.Lag != int64(6-n) {
			t.Fatalf("lag after %d of 6 = %d, want %d", n, res.Lag, 6-n)
		}
		switch {
		case n == 6 && !res.Oldest.IsZero():
			t.Fatalf("oldest %v at the end, want none", res.Oldest)
		case n < 6 && !res.Oldest.IsZero() && !res.Oldest.Equal(t0.Add(time.Duration(n)*time.Second)):
			t.Fatalf("oldest after %d = %v, want the timestamp of record %d (%v)", n, res.Oldest, n, t0.Add(time.Duration(n)*time.Second))
		}
	}
	if dated == 0 {
		// one produce request, one fetch answer: the client holds the
		// records after the first two when the first Fetch returns
		t.Fatal("no fetch dated the next record")
	}
	for i, m := range got {
		if !m.Time.Equal(t0.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("record %d stamped %v", i, m.Time)
		}
	}
}
