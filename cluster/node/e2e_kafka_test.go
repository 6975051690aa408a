package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/internal/testserver"
	"github.com/drover-dev/drover/testkit"
)

// Kafka end to end (kfake with SASL PLAIN, 4 partitions), on SQLite and on
// PostgreSQL. The SASL password reaches the node only through
// ${env:DROVER_E2E_KAFKA_PASSWORD}; it must show in none of the node's
// debug logs, trees, debug endpoint, metrics and printed config.
func TestE2EKafka(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { e2eKafka(t, e2eSQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { e2eKafka(t, e2ePG.URL(t)) })
}

// A broker address is host:port: a URL scheme is refused, naming the field.
func TestE2EKafkaBrokerWithSchemeRefused(t *testing.T) {
	yaml := `node: {name: n1}
sources:
  - name: orders
    type: kafka
    kafka:
      brokers: ["127.0.0.1:9092", "kafka://h:9092"]
      topic: events
`
	_, err := config.Parse([]byte(yaml), config.Options{})
	if err == nil {
		t.Fatal("config.Parse accepted a broker address with a URL scheme")
	}
	msg := err.Error()
	if !strings.Contains(msg, "sources[0].kafka.brokers[1]") || !strings.Contains(msg, "URL scheme") {
		t.Fatalf("error %q: want it to name sources[0].kafka.brokers[1] and the URL scheme", msg)
	}
	if strings.Contains(msg, "brokers[0]") {
		t.Fatalf("error %q names brokers[0], which is valid", msg)
	}
}

const (
	e2eKafkaTopic = "events"
	e2eKafkaParts = 4
	e2eKafkaUser  = "drover-e2e"
	e2eKafkaEnv   = "DROVER_E2E_KAFKA_PASSWORD"
)

func e2eKafka(t *testing.T, storeURL string) {
	var pw [12]byte
	if _, err := rand.Read(pw[:]); err != nil {
		t.Fatal(err)
	}
	password := "pw-" + hex.EncodeToString(pw[:])
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(e2eKafkaParts, e2eKafkaTopic),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", e2eKafkaUser, password))
	if err != nil {
		testserver.SkipOrFail(t, "kfake did not start: "+err.Error())
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]

	sent := e2eProduceKafka(t, addr, password, e2eWorkload(t, 11, false, true))
	t.Setenv(e2eKafkaEnv, password)
	section := `brokers: ["` + addr + `"]
topic: ` + e2eKafkaTopic + `
sasl:
  mechanism: plain
  username: ` + e2eKafkaUser + `
  password: "${env:` + e2eKafkaEnv + `}"`
	rec := &e2eSource{Name: "orders", Table: "orders", Sent: sent}
	aud := &e2eSource{Name: "orders-audit", Audit: true, Sent: sent}
	res := runE2E(t, e2eRun{
		StoreURL:    storeURL,
		Sources:     []*e2eSource{rec, aud},
		SourcesYAML: rec.YAML("kafka", section) + aud.YAML("kafka", section),
		LogLevel:    slog.LevelDebug,
	})

	for i, cfg := range res.Configs {
		if got := cfg.Sources[0].Kafka.SASL.Password.Reveal(); got != password {
			t.Fatalf("config of node %d: the password from ${env:%s} is %q", i+1, e2eKafkaEnv, got)
		}
	}
	// The debug logs covered the SASL handshake, so their check means
	// something.
	if logs := strings.ToLower(res.Logs.String()); !strings.Contains(logs, "sasl") {
		t.Errorf("the node's debug logs never mention SASL: the password check saw no authentication")
	}
	e2eNoSecret(t, res, password)
	// no commit_to_group: the units must not try to record their
	// positions in the broker (each try failed with a WARN every second)
	if logs := res.Logs.String(); strings.Contains(logs, "record position in the broker") {
		i := strings.Index(logs, "record position in the broker")
		t.Errorf("without commit_to_group the node logs failed commits to the group: %s", logs[max(0, i-80):min(len(logs), i+200)])
	}
}

// e2eProduceKafka writes msgs, each to the partition of its key, and
// returns them with their partitions and offsets.
func e2eProduceKafka(t *testing.T, addr, password string, msgs []brokers.Message) []e2eMsg {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(e2eKafkaTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SASL(plain.Auth{User: e2eKafkaUser, Pass: password}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		p, _ := strconv.Atoi(testkit.PartitionOf(m, e2eKafkaParts))
		recs[i] = &kgo.Record{Key: m.Key, Value: m.Value, Partition: int32(p)}
		if m.Tombstone {
			recs[i].Value = nil
		}
	}
	return e2eProduceSync(t, cl, recs, msgs)
}

// e2eProduceSync produces recs (the records of msgs, in order) and returns
// msgs with the partitions and offsets the broker gave them.
func e2eProduceSync(t *testing.T, cl *kgo.Client, recs []*kgo.Record, msgs []brokers.Message) []e2eMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	out := make([]e2eMsg, len(msgs))
	for i, r := range recs {
		m := msgs[i]
		m.Position = strconv.FormatInt(r.Offset, 10)
		out[i] = e2eMsg{Part: strconv.Itoa(int(r.Partition)), Msg: m}
	}
	return out
}
