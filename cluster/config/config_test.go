package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/internal/redact"
)

// gossipKey is base64 of 32 bytes.
const gossipKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func testOptions(env map[string]string, files map[string]string) Options {
	return Options{
		LookupEnv: func(n string) (string, bool) { v, ok := env[n]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if v, ok := files[p]; ok {
				return []byte(v), nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
		Hostname: func() (string, error) { return "host-a", nil },
	}
}

// testEnv are the environment variables the test configs reference: secrets
// may only come from ${env:} and ${file:}.
var testEnv = map[string]string{
	"TOKEN": "tok-secret-1", "EMPTY": "",
	"PG_URL":      "postgres://drover:pg-secret-3@db:5432/drover?sslmode=disable",
	"PG_NOHOST":   "postgres://u:hunter2@/db",
	"AWS_SECRET":  "aws-secret-4",
	"AWS_SECRET2": "aws-secret-7",
	"NATS_PW":     "nats-secret-5",
	"SASL_PW":     "sasl-secret-6",
	"SR_PW":       "sr-secret-10",
	"NATS_URL":    "nats://u:natsurl-secret-8@h:4222",
	"NATS_BAD":    "nats://h:4222,http://u:natspw@h:1",
	"PG_QP":       "postgres://drover:pg-secret-3@db:5432/d?password=qp-secret-9",
	"KEY":         gossipKey,
	"SHORT_KEY":   "c2hvcnQ=",
	"BAD_KEY":     "!!!",
	"PLAIN":       "s3cr3t",
	"PG_AT":       "postgres://drover:p@ss-secret-11@db/d",
	"NATS_AT":     "nats://h:1,nats://u:p@ss-secret-12@h:2",
}

// testPEMKey stands for a private key read by ${file:} into a field that
// wants a path: it must never be quoted.
const testPEMKey = "-----BEGIN PRIVATE KEY-----\nMIIEvQ-not-a-real-key-pem-secret-10\n-----END PRIVATE KEY-----\n"

func parse(t *testing.T, y string) (*Config, Errors) {
	t.Helper()
	c, err := Parse([]byte(y), testOptions(testEnv, map[string]string{"/k": gossipKey + "\n", "/pw": "file-secret-2\r\n", "/pem": testPEMKey}))
	if err == nil {
		return c, nil
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error %T %v is not Errors", err, err)
	}
	if c != nil {
		t.Fatalf("Parse returned a config with errors")
	}
	return nil, errs
}

// node.group_commit is on unless the file says false.
func TestGroupCommitSetting(t *testing.T) {
	const src = "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t}}]\n"
	for y, want := range map[string]bool{"": true, "node: {group_commit: true}\n": true, "node: {group_commit: false}\n": false} {
		c, errs := parse(t, y+src)
		if errs != nil {
			t.Fatalf("%q: %v", y, errs)
		}
		if c.Node.GroupCommit != want {
			t.Errorf("%q: group_commit = %v, want %v", y, c.Node.GroupCommit, want)
		}
	}
}

// node.seek_expiry is 5m unless the file says otherwise.
func TestSeekExpirySetting(t *testing.T) {
	const src = "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t}}]\n"
	for y, want := range map[string]time.Duration{"": 5 * time.Minute, "node: {seek_expiry: 90s}\n": 90 * time.Second} {
		c, errs := parse(t, y+src)
		if errs != nil {
			t.Fatalf("%q: %v", y, errs)
		}
		if c.Node.SeekExpiry != want {
			t.Errorf("%q: seek_expiry = %v, want %v", y, c.Node.SeekExpiry, want)
		}
	}
}

// node.gc_tuning is adaptive unless the file says off.
func TestGCTuningSetting(t *testing.T) {
	const src = "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t}}]\n"
	for y, want := range map[string]string{"": "adaptive", "node: {gc_tuning: off}\n": "off"} {
		c, errs := parse(t, y+src)
		if errs != nil {
			t.Fatalf("%q: %v", y, errs)
		}
		if c.Node.GCTuning != want {
			t.Errorf("%q: gc_tuning = %q, want %q", y, c.Node.GCTuning, want)
		}
	}
}

func TestExampleFile(t *testing.T) {
	data, err := os.ReadFile("testdata/drover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, testOptions(map[string]string{"DROVER_DEBUG_TOKEN": "t0k"}, map[string]string{"/etc/drover/gossip.key": gossipKey + "\n"}))
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	want := &Config{
		Node:    Node{Name: "node-1", DebugAddr: "127.0.0.1:7070", DebugToken: "t0k", Capacity: 1, GroupCommit: true, SeekExpiry: 5 * time.Minute, GCTuning: "adaptive"},
		Cluster: Cluster{Bind: "127.0.0.1:7946", Join: []string{"127.0.0.1:7946", "127.0.0.1:7947", "127.0.0.1:7948"}, Profile: "default", SecretKey: gossipKey, MaxCapacity: 16},
		Store:   Store{URL: "postgres://user@host:5432/db", DedupeRetention: 168 * time.Hour, Timeout: 10 * time.Second},
		Log:     Log{Format: "text", Level: "info"},
		Sources: []Source{{
			Name: "orders", Type: "kafka", Start: "earliest", OnPositionReset: "earliest", Mode: "records",
			Records:   Records{Table: "orders", Key: "id", Schema: "id:int, name:text", Declared: quality.Schema{{Name: "id", Type: quality.TypeInt}, {Name: "name", Type: quality.TypeText}}},
			BatchSize: 500, MaxWait: time.Second, MaxConsecutiveFailures: 5, Slots: 1, MaxMessageBytes: 1 << 20,
			LeaseTTL: 10 * time.Second, DiscoveryInterval: 30 * time.Second, BatchBytes: 16 << 20, DeadLetterMaxBytes: 256 << 10,
			Decoding: Decoding{Format: "json"},
			Kafka:    &kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "orders"},
		}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("example config:\n got %s\nwant %s", c, want)
	}
	if w := c.Warnings(); len(w) > 0 {
		t.Errorf("the example config has warnings: %v", w)
	}
	if k := c.Cluster.Key(); string(k) != "0123456789abcdef0123456789abcdef" {
		t.Errorf("Key() = %q", k)
	}
	if c.Sources[0].IsQueue() || c.Sources[0].StartMode() != brokers.Earliest || c.Sources[0].Decode() != (decode.Config{KeyField: "id", MaxBytes: 1 << 20, MaxDeadLetterBytes: 256 << 10, Format: decode.FormatJSON}) {
		t.Errorf("source helpers: queue %v start %v decode %+v", c.Sources[0].IsQueue(), c.Sources[0].StartMode(), c.Sources[0].Decode())
	}
}

const fullYAML = `
node:
  debug_addr: 0.0.0.0:7070
  debug_token: ${env:TOKEN}
  capacity: 2.5
cluster:
  bind: 0.0.0.0:7946
  advertise: 10.0.0.5:7946
  join: [10.0.0.6:7946, "node-3.drover:7946"]
  profile: fast
  secret_key: ${file:/k}
  max_capacity: 4
store:
  url: ${env:PG_URL}
  dedupe_retention: 24h
  timeout: 3s
  max_conns: 32
log: {format: json, level: debug}
sources:
  - name: orders
    type: kafka
    start: latest
    records: {key: customer.id, schema: "id:int, tags:json"}
    batch_size: 1000
    max_wait: 250ms
    max_consecutive_failures: 3
    max_message_bytes: 2048
    lease_ttl: 15s
    discovery_interval: 1m
    kafka:
      brokers: [k1:9092, "k2:9093"]
      topic: orders.v1
      client_id: drover-a
      tls: {enabled: true, ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}
      sasl: {mechanism: scram-sha-512, username: u, password: "${file:/pw}"}
      fetch_max_bytes: 1048576
      commit_to_group: drover-orders
      isolation: read_uncommitted
  - name: jobs-q
    type: sqs
    slots: 4
    sqs:
      queue_url: https://sqs.eu-west-1.amazonaws.com/123/jobs.fifo
      region: eu-west-1
      endpoint: http://127.0.0.1:4566
      wait: 5s
      access_key_id: AKIA1
      secret_access_key: ${env:AWS_SECRET}
  - name: clicks
    type: kinesis
    kinesis: {stream: clicks, region: us-east-1, endpoint: "http://127.0.0.1:4567"}
  - name: events
    type: pubsub
    mode: handler
    handler_name: billing.v2
    pubsub: {project: p1, subscription: billing-events, endpoint: "127.0.0.1:8085", max_outstanding: 100}
  - name: audit
    type: nats
    nats: {url: "nats://a:4222, nats://b:4222", stream: AUDIT, subject: audit.>, ack_wait: 30s, max_ack_pending: 500, user: n, password: '${env:NATS_PW}'}
  - name: log
    type: nats
    nats: {url: "tls://a:4222", stream: LOG, mode: stream, credentials_file: /n.creds}
  - name: demo
    type: memory
    memory: {partitions: 12}
  - name: demo_q
    type: memory
    slots: 3
    memory: {queue: true}
`

func TestFullConfig(t *testing.T) {
	c, errs := parse(t, fullYAML)
	if errs != nil {
		t.Fatalf("full config: %v", errs)
	}
	if c.Node.Name != "host-a" || c.Node.Capacity != 2.5 || c.Node.DebugToken.Reveal() != "tok-secret-1" {
		t.Errorf("node %+v", c.Node)
	}
	if c.Cluster.Profile != "fast" || len(c.Cluster.Join) != 2 || c.Cluster.Join[1] != "node-3.drover:7946" || c.Cluster.Advertise != "10.0.0.5:7946" || len(c.Cluster.Key()) != 32 || c.Cluster.MaxCapacity != 4 {
		t.Errorf("cluster %+v", c.Cluster)
	}
	if c.Store.DedupeRetention != 24*time.Hour || !strings.Contains(c.Store.URL.Reveal(), "pg-secret-3") ||
		c.Store.Timeout != 3*time.Second || c.Store.MaxConns != 32 {
		t.Errorf("store %+v", c.Store)
	}
	if c.Log.Format != "json" || c.Log.SlogLevel() != slog.LevelDebug {
		t.Errorf("log %+v", c.Log)
	}
	o := c.Sources[0]
	wantKafka := &kafka.Config{Brokers: []string{"k1:9092", "k2:9093"}, Topic: "orders.v1", ClientID: "drover-a",
		TLS:           kafka.TLS{Enable: true, CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"},
		SASL:          kafka.SASL{Mechanism: "scram-sha-512", User: "u", Password: "file-secret-2"},
		FetchMaxBytes: 1 << 20, CommitToGroup: "drover-orders", Isolation: KafkaReadUncommitted}
	if !reflect.DeepEqual(o.Kafka, wantKafka) {
		t.Errorf("kafka %+v", o.Kafka)
	}
	if o.Records.Table != "orders" || o.Records.Key != "customer.id" || len(o.Records.Declared) != 2 || o.StartMode() != brokers.Latest ||
		o.BatchSize != 1000 || o.MaxWait != 250*time.Millisecond || o.MaxConsecutiveFailures != 3 || o.MaxMessageBytes != 2048 ||
		o.LeaseTTL != 15*time.Second || o.DiscoveryInterval != time.Minute || o.IsQueue() {
		t.Errorf("orders %+v", o)
	}
	q := c.Sources[1]
	if !q.IsQueue() || q.Slots != 4 || !q.SQS.FIFO() || q.SQS.WaitTime != 5*time.Second || q.SQS.VisibilityTimeout != DefaultSQSVisibilityTimeout || q.Records.Table != "jobs_q" {
		t.Errorf("jobs-q %+v %+v", q, q.SQS)
	}
	if k := c.Sources[2]; k.IsQueue() || k.Kinesis.StreamName != "clicks" {
		t.Errorf("clicks %+v", k)
	}
	if e := c.Sources[3]; e.Mode != "handler" || e.HandlerName != "billing.v2" || e.Records.Table != "" || !e.IsQueue() || e.PubSub.MaxMessages != 100 {
		t.Errorf("events %+v", e)
	}
	if a := c.Sources[4]; !a.IsQueue() || a.NATS.Consumer != "drover-audit" || a.NATS.AckWait != 30*time.Second || a.NATS.Password.Reveal() != "nats-secret-5" {
		t.Errorf("audit %+v %+v", a, a.NATS)
	}
	if l := c.Sources[5]; l.IsQueue() || l.NATS.Consumer != "" || l.NATS.Mode != NATSStream {
		t.Errorf("log %+v", l.NATS)
	}
	if d := c.Sources[6]; d.IsQueue() || d.Memory.Partitions != 12 {
		t.Errorf("demo %+v", d.Memory)
	}
	if d := c.Sources[7]; !d.IsQueue() || d.Slots != 3 {
		t.Errorf("demo_q %+v", d)
	}
}

func TestDefaults(t *testing.T) {
	c, errs := parse(t, "sources: [{name: m, type: memory, memory: {}}]\n")
	if errs != nil {
		t.Fatal(errs)
	}
	if c.Node.Name != "host-a" || c.Node.DebugAddr != DefaultDebugAddr || c.Node.Capacity != 1 ||
		c.Cluster.Bind != DefaultBind || c.Cluster.Profile != "default" || c.Cluster.Key() != nil || c.Cluster.MaxCapacity != 16 ||
		c.Store.URL != DefaultStoreURL || c.Store.DedupeRetention != 168*time.Hour ||
		c.Log.Format != "text" || c.Log.Level != "info" {
		t.Errorf("defaults: %+v", c)
	}
	s := c.Sources[0]
	if s.Start != "earliest" || s.Mode != "records" || s.Records.Table != "m" || s.BatchSize != 500 || s.MaxWait != time.Second ||
		s.MaxConsecutiveFailures != 5 || s.Slots != 1 || s.MaxMessageBytes != 1<<20 || s.LeaseTTL != 10*time.Second ||
		s.DiscoveryInterval != 30*time.Second || s.Memory.Partitions != 1 {
		t.Errorf("source defaults: %+v", s)
	}
}

// src is a valid source entry to append fields to.
const src = "sources:\n  - name: s\n    type: memory\n    memory: {}\n"

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every error, exactly
	}{
		{"decode format", src + "    decode: {format: xml}\n", []string{`sources[0].decode.format: must be one of json, avro, protobuf, json_schema, not "xml"`}},
		{"decode registry needed", src + "    decode: {format: avro}\n", []string{"sources[0].decode.registry: required with format avro: the schema registry's url"}},
		{"decode registry with json", src + "    decode: {registry: {url: 'http://sr:8081'}}\n", []string{"sources[0].decode.registry: only valid with format avro, protobuf or json_schema"}},
		{"decode registry url credentials", src + "    decode: {format: protobuf, registry: {url: 'http://u:p@sr:8081'}}\n", []string{"sources[0].decode.registry.url: must not carry credentials: set username and password instead"}},
		{"decode registry url query", src + "    decode: {format: protobuf, registry: {url: 'http://sr:8081/?api_key=k'}}\n", []string{"sources[0].decode.registry.url: must not have a query or fragment: set username and password instead"}},
		{"decode registry url scheme", src + "    decode: {format: json_schema, registry: {url: 'sr:8081'}}\n", []string{`sources[0].decode.registry.url: the scheme must be http or https, not "sr"`}},
		{"decode password without user", src + "    decode: {format: avro, registry: {url: 'http://sr:8081', password: '${env:SR_PW}'}}\n", []string{"sources[0].decode.registry.username: required with a password"}},
		{"decode ok", src + "    decode: {format: avro, registry: {url: 'http://sr:8081', username: u, password: '${env:SR_PW}'}}\n", nil},
		{"two documents", src + "---\nnode: {}\n", []string{"(root): the file must hold one YAML document, not several"}},
		{"no sources", "node: {name: a}\n", []string{"sources: required: at least one source"}},
		{"yaml syntax", "a: [\n", nil}, // checked below: (root) prefix
		{"root not mapping", "- 1\n", []string{"(root): must be a mapping, not a list", "sources: required: at least one source"}},
		{"unknown top", src + "nodes: {}\n", []string{`nodes: unknown field (did you mean "node"?)`}},
		{"unknown nested", src + "    kafkaa: {}\n", []string{`sources[0].kafkaa: unknown field (did you mean "kafka"?)`}},
		{"unknown deep", src + "    records: {tabel: x}\n", []string{`sources[0].records.tabel: unknown field (did you mean "table"?)`}},
		{"unknown no suggestion", "node: {zzzzzz: 1}\n" + src, []string{`node.zzzzzz: unknown field`}},
		{"section not mapping", "node: 5\n" + src, []string{"node: must be a mapping, not an integer"}},
		{"group commit not a bool", "node: {group_commit: sometimes}\n" + src, []string{`node.group_commit: must be true or false, not "sometimes"`}},
		{"gc tuning unknown", "node: {gc_tuning: fast}\n" + src, []string{`node.gc_tuning: must be one of adaptive, off, not "fast"`}},
		{"seek expiry too short", "node: {seek_expiry: 1s}\n" + src, []string{`node.seek_expiry: must be between 10s and 24h0m0s, not 1s`}},
		{"bad node name", "node: {name: 'a b'}\n" + src, []string{`node.name: "a b" must be letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)`}},
		{"debug addr scheme", "node: {debug_addr: 'http://x:1'}\n" + src, []string{`node.debug_addr: "http://x:1" must be host:port, without a URL scheme`}},
		{"debug token needed", "node: {debug_addr: '0.0.0.0:7070'}\n" + src, []string{"node.debug_token: required when node.debug_addr (0.0.0.0:7070) is not a loopback address"}},
		{"debug token needed empty host", "node: {debug_addr: ':7070'}\n" + src, []string{"node.debug_token: required when node.debug_addr (:7070) is not a loopback address"}},
		{"debug localhost ok", "node: {debug_addr: 'localhost:7070'}\n" + src, nil},
		{"debug ipv6 loopback ok", "node: {debug_addr: '[::1]:7070'}\n" + src, nil},
		{"capacity", "node: {capacity: 0}\n" + src, []string{"node.capacity: must be a number above 0 and at most cluster.max_capacity (16), not 0"}},
		{"capacity above the maximum", "node: {capacity: 1e9}\n" + src, []string{"node.capacity: must be a number above 0 and at most cluster.max_capacity (16), not 1e+09"}},
		{"capacity above the default max_capacity", "node: {capacity: 17}\n" + src, []string{"node.capacity: must be a number above 0 and at most cluster.max_capacity (16), not 17 (or raise cluster.max_capacity, to the same value on every node)"}},
		{"capacity at the default max_capacity", "node: {capacity: 16}\n" + src, nil},
		{"capacity above max_capacity", "node: {capacity: 2.5}\ncluster: {max_capacity: 2}\n" + src, []string{"node.capacity: must be a number above 0 and at most cluster.max_capacity (2), not 2.5 (or raise cluster.max_capacity, to the same value on every node)"}},
		{"capacity within a raised max_capacity", "node: {capacity: 1000}\ncluster: {max_capacity: 1000}\n" + src, nil},
		{"capacity within a fractional max_capacity", "node: {capacity: 0.5}\ncluster: {max_capacity: 0.5}\n" + src, nil},
		{"max_capacity zero", "cluster: {max_capacity: 0}\n" + src, []string{"cluster.max_capacity: must be a number above 0 and at most 1000, not 0"}},
		{"max_capacity negative", "cluster: {max_capacity: -4}\n" + src, []string{"cluster.max_capacity: must be a number above 0 and at most 1000, not -4"}},
		{"max_capacity above the bound", "cluster: {max_capacity: 1001}\n" + src, []string{"cluster.max_capacity: must be a number above 0 and at most 1000, not 1001"}},
		{"max_capacity and capacity both out of range", "node: {capacity: 2000}\ncluster: {max_capacity: 5000}\n" + src, []string{
			"node.capacity: must be a number above 0 and at most 1000, not 2000",
			"cluster.max_capacity: must be a number above 0 and at most 1000, not 5000"}},
		{"max_capacity type", "cluster: {max_capacity: many}\n" + src, []string{`cluster.max_capacity: must be a number, not "many"`}},
		{"capacity type", "node: {capacity: lots}\n" + src, []string{`node.capacity: must be a number, not "lots"`}},
		{"profile", "cluster: {profile: quick}\n" + src, []string{`cluster.profile: must be one of default, fast, not "quick"`}},
		{"bind", "cluster: {bind: 'nope'}\n" + src, []string{`cluster.bind: "nope" must be host:port`}},
		{"join entry", "cluster: {join: ['a:1', 'b', 'c:99999']}\n" + src, []string{`cluster.join[1]: "b" must be host:port`, `cluster.join[2]: "c:99999": port "99999" must be a number from 1 to 65535`}},
		{"join not list", "cluster: {join: 'a:1'}\n" + src, []string{"cluster.join: must be a list, not a string"}},
		{"join entry mapping", "cluster: {join: [{a: 1, b: 2}]}\n" + src, []string{"cluster.join[0]: must be a single value, not a mapping"}},
		{"secret key short", "cluster: {secret_key: '${env:SHORT_KEY}'}\n" + src, []string{"cluster.secret_key: must be base64 of exactly 32 bytes, not 5 bytes"}},
		{"secret key not base64", "cluster: {secret_key: '${env:BAD_KEY}'}\n" + src, []string{"cluster.secret_key: must be base64 of exactly 32 bytes: not valid base64"}},
		// Issue 10, item 1: plain gossip only on loopback, as debug_token.
		{"secret key needed", "cluster: {bind: '0.0.0.0:7946'}\n" + src, []string{"cluster.secret_key: required when cluster.bind (0.0.0.0:7946) is not a loopback address: " +
			"without it anyone who reaches the gossip port can join the cluster and be given units"}},
		{"secret key needed empty host", "cluster: {bind: ':7946'}\n" + src, []string{"cluster.secret_key: required when cluster.bind (:7946) is not a loopback address: " +
			"without it anyone who reaches the gossip port can join the cluster and be given units"}},
		{"secret key needed advertise", "cluster: {advertise: '10.0.0.5:7946'}\n" + src, []string{"cluster.secret_key: required when cluster.advertise (10.0.0.5:7946) is not a loopback address: " +
			"without it anyone who reaches the gossip port can join the cluster and be given units"}},
		{"secret key given", "cluster: {bind: '0.0.0.0:7946', advertise: '10.0.0.5:7946', secret_key: '${file:/k}', join: ['10.0.0.6:7946']}\n" + src, nil},
		{"gossip localhost ok", "cluster: {bind: '127.0.0.1:7946', advertise: 'localhost:7946', join: ['127.0.0.1:7947']}\n" + src, nil},
		{"gossip ipv6 loopback ok", "cluster: {bind: '[::1]:7946', join: ['[::1]:7947']}\n" + src, nil},
		{"debug tls", "node: {debug_tls: {cert: /c.pem, key: /k.pem, ca: /ca.pem}}\n" + src, nil},
		{"debug tls ca only", "node: {debug_tls: {ca: /ca.pem}}\n" + src, nil},
		{"debug tls key without cert", "node: {debug_tls: {key: /k.pem}}\n" + src, []string{"node.debug_tls.cert: required with key"}},
		{"debug tls cert without key", "node: {debug_tls: {cert: /c.pem}}\n" + src, []string{"node.debug_tls.key: required with cert"}},
		{"debug tls key content", "node: {debug_tls: {cert: /c.pem, key: '${file:/pem}'}}\n" + src, []string{"node.debug_tls.key: must be the path of a PEM file, not its content (write the path itself, not a ${file:} reference)"}},
		{"debug tls unknown", "node: {debug_tls: {cert_file: /c.pem}}\n" + src, []string{"node.debug_tls.cert_file: unknown field"}},
		{"store scheme", "store: {url: 'mysql://x/db'}\n" + src, []string{"store.url: mysql://x/db: must start with postgres://, postgresql:// or sqlite:"}},
		{"store sqlite path", "store: {url: 'sqlite:'}\n" + src, []string{"store.url: sqlite:: a sqlite URL needs a path: sqlite:./drover.db or sqlite:///var/lib/drover/drover.db"}},
		{"store pg host masks password", "store: {url: '${env:PG_NOHOST}'}\n" + src, []string{"store.url: the value from ${env:PG_NOHOST}: a postgres URL needs a host: postgres://user@host:5432/db"}},
		// pgx ends the user info at the first '@': it would quote the
		// rest of the password as the host
		{"store url two @", "store: {url: '${env:PG_AT}'}\n" + src, []string{"store.url: " + redact.ErrUnescapedAt.Error()}},
		{"retention", "store: {dedupe_retention: 0s}\n" + src, []string{"store.dedupe_retention: must be positive, not 0s"}},
		{"retention type", "store: {dedupe_retention: 7}\n" + src, []string{"store.dedupe_retention: must be a duration such as 500ms, 10s or 1h30m, not an integer"}},
		{"retention text", "store: {dedupe_retention: 7days}\n" + src, []string{`store.dedupe_retention: must be a duration such as 500ms, 10s or 1h30m, not "7days"`}},
		{"store timeout zero", "store: {timeout: 0s}\n" + src, []string{"store.timeout: must be at least 10ms, not 0s"}},
		{"store timeout short", "store: {timeout: 1ms}\n" + src, []string{"store.timeout: must be at least 10ms, not 1ms"}},
		{"store timeout type", "store: {timeout: 10}\n" + src, []string{"store.timeout: must be a duration such as 500ms, 10s or 1h30m, not an integer"}},
		{"store max conns", "store: {max_conns: -1}\n" + src, []string{"store.max_conns: must not be negative, not -1"}},
		{"store max conns type", "store: {max_conns: many}\n" + src, []string{`store.max_conns: must be an integer, not "many"`}},
		{"log", "log: {format: xml, level: loud}\n" + src, []string{`log.format: must be one of text, json, not "xml"`, `log.level: must be one of debug, info, warn, error, not "loud"`}},
		{"sources not list", "sources: {name: a}\n", []string{"sources: must be a list, not a mapping"}},
		{"source not mapping", "sources: [5]\n", []string{"sources[0]: must be a mapping, not an integer"}},
		{"source name missing", "sources: [{type: memory, memory: {}}]\n", []string{"sources[0].name: required"}},
		{"source name bad", "sources: [{name: Orders, type: memory, memory: {}}]\n", []string{`sources[0].name: "Orders" must be lower-case letters, digits, '_' or '-'`}},
		{"source name dup", src + "  - {name: s, type: memory, memory: {}}\n", []string{`sources[1].name: "s" is already the name of sources[0]`}},
		{"type missing", "sources: [{name: a}]\n", []string{"sources[0].type: required: one of kafka, kinesis, sqs, pubsub, nats, memory"}},
		{"type bad", "sources: [{name: a, type: rabbit}]\n", []string{`sources[0].type: must be one of kafka, kinesis, sqs, pubsub, nats, memory, not "rabbit"`}},
		{"section missing", "sources: [{name: a, type: kafka}]\n", []string{"sources[0].kafka: required for type kafka"}},
		{"section extra", src + "    sqs: {queue_url: 'http://q/1', region: r}\n", []string{`sources[0].sqs: not allowed with type "memory": a source has only the section of its type`}},
		{"kafka required", "sources: [{name: a, type: kafka, kafka: {}}]\n", []string{"sources[0].kafka.brokers: required: at least one host:port", "sources[0].kafka.topic: required"}},
		{"second source topic", src + "  - {name: b, type: kafka, kafka: {brokers: ['h:1']}}\n", []string{"sources[1].kafka.topic: required"}},
		{"kafka broker scheme", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1', 'kafka://h:9092'], topic: t}}]\n", []string{`sources[0].kafka.brokers[1]: "kafka://h:9092" must be host:port, without a URL scheme`}},
		{"kafka broker no port", "sources: [{name: a, type: kafka, kafka: {brokers: [h], topic: t}}]\n", []string{`sources[0].kafka.brokers[0]: "h" must be host:port`}},
		{"kafka broker no host", "sources: [{name: a, type: kafka, kafka: {brokers: [':9092'], topic: t}}]\n", []string{`sources[0].kafka.brokers[0]: ":9092": host is missing`}},
		{"kafka topic bad", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: 'a b'}}]\n", []string{`sources[0].kafka.topic: "a b" must be 1 to 249 letters, digits, '.', '_' or '-'`}},
		{"kafka tls", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, tls: {ca_file: /x, cert_file: /c}}}]\n", []string{"sources[0].kafka.tls.enabled: must be true when other tls settings are given", "sources[0].kafka.tls: cert_file and key_file go together"}},
		{"kafka tls bool", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, tls: {enabled: yes please}}}]\n", []string{`sources[0].kafka.tls.enabled: must be true or false, not "yes please"`}},
		{"kafka sasl", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, sasl: {mechanism: gssapi}}}]\n", []string{`sources[0].kafka.sasl.mechanism: must be one of plain, scram-sha-256, scram-sha-512, not "gssapi"`, "sources[0].kafka.sasl.username: required", "sources[0].kafka.sasl.password: required"}},
		{"kafka fetch", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, fetch_max_bytes: -1}}]\n", []string{"sources[0].kafka.fetch_max_bytes: must not be negative, not -1"}},
		{"kafka isolation", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, isolation: read-committed}}]\n", []string{`sources[0].kafka.isolation: must be one of read_committed, read_uncommitted, not "read-committed"`}},
		{"start", src + "    start: oldest\n", []string{`sources[0].start: must be one of earliest, latest, not "oldest"`}},
		{"mode", src + "    mode: stream\n", []string{`sources[0].mode: must be one of records, handler, not "stream"`}},
		{"handler needs name", src + "    mode: handler\n", []string{"sources[0].handler_name: required with mode: handler (the name the handler was registered under)"}},
		{"handler with records", src + "    mode: handler\n    handler_name: h\n    records: {key: id}\n", []string{"sources[0].records: only valid with mode: records"}},
		{"handler name in records mode", src + "    handler_name: h\n", []string{"sources[0].handler_name: only valid with mode: handler"}},
		{"table bad", src + "    records: {table: 'drover_x'}\n", []string{`sources[0].records.table: table name "drover_x": the drover_ prefix is reserved`}},
		{"table default bad", "sources: [{name: 9lives, type: memory, memory: {}}]\n", []string{`sources[0].records.table: the default from the source name is not valid (table name "9lives": must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$): set records.table`}},
		{"key path bad", src + "    records: {key: 'a..b'}\n", []string{`sources[0].records.key: "a..b": a dotted path with no empty segment, such as id or customer.id`}},
		{"schema bad", src + "    records: {schema: 'id:int, x:decimal'}\n", []string{`sources[0].records.schema: schema entry 2 "x:decimal": unknown type "decimal" (want one of int, float, number, text, string, bool, json, object, array, timestamp)`}},
		{"batch size", src + "    batch_size: 0\n", []string{"sources[0].batch_size: must be between 1 and 10000, not 0"}},
		{"batch size big", src + "    batch_size: 10001\n", []string{"sources[0].batch_size: must be between 1 and 10000, not 10001"}},
		{"batch size type", src + "    batch_size: many\n", []string{`sources[0].batch_size: must be an integer, not "many"`}},
		{"batch size float", src + "    batch_size: 1.5\n", []string{"sources[0].batch_size: must be an integer, not a number"}},
		{"batch size huge", src + "    batch_size: 99999999999\n", []string{"sources[0].batch_size: 99999999999 is too large"}},
		{"max wait", src + "    max_wait: 0s\n", []string{"sources[0].max_wait: must be between 1ms and 1h0m0s, not 0s"}},
		{"failures", src + "    max_consecutive_failures: 0\n", []string{"sources[0].max_consecutive_failures: must be between 1 and 1000, not 0"}},
		{"message bytes", src + "    max_message_bytes: -5\n", []string{"sources[0].max_message_bytes: must be between 1 and 1073741824, not -5"}},
		{"lease ttl", src + "    lease_ttl: 100ms\n", []string{"sources[0].lease_ttl: must be between 1s and 1h0m0s, not 100ms"}},
		{"lease ttl vs max wait", src + "    max_wait: 20s\n", []string{"sources[0].lease_ttl: must be longer than max_wait (20s), or the lease lapses while a fetch waits"}},
		{"discovery", src + "    discovery_interval: 10ms\n", []string{"sources[0].discovery_interval: must be between 1s and 24h0m0s, not 10ms"}},
		{"slots on stream", src + "    slots: 4\n", []string{"sources[0].slots: only valid for queue sources (sqs, pubsub, nats in queue mode, memory with queue: true)"}},
		{"slots range", "sources: [{name: a, type: memory, slots: 257, memory: {queue: true}}]\n", []string{"sources[0].slots: must be between 1 and 256, not 257"}},
		{"memory both", "sources: [{name: a, type: memory, memory: {queue: true, partitions: 3}}]\n", []string{"sources[0].memory.partitions: not allowed with queue: true (a memory source is a stream of partitions or a queue)"}},
		{"memory partitions", "sources: [{name: a, type: memory, memory: {partitions: 0}}]\n", []string{"sources[0].memory.partitions: must be between 1 and 1024, not 0"}},
		{"sqs required", "sources: [{name: a, type: sqs, sqs: {}}]\n", []string{"sources[0].sqs.region: required", "sources[0].sqs.queue_url: required"}},
		{"sqs blank queue_url", "sources: [{name: a, type: sqs, sqs: {queue_url: '  ', region: r}}]\n", []string{"sources[0].sqs.queue_url: required"}},
		{"sqs urls", "sources: [{name: a, type: sqs, sqs: {queue_url: 'sqs/q', region: r, endpoint: 'localhost:4566', wait: 21s, visibility_timeout: -1s, access_key_id: A}}]\n", []string{
			`sources[0].sqs.queue_url: "sqs/q" must be an http:// or https:// URL with a host`,
			`sources[0].sqs.endpoint: "localhost:4566" must be an http:// or https:// URL with a host`,
			"sources[0].sqs.wait: must be between 0s and 20s, not 21s",
			"sources[0].sqs.visibility_timeout: must be between 0s and 12h0m0s, not -1s",
			"sources[0].sqs.secret_access_key: required with access_key_id"}},
		{"kinesis required", "sources: [{name: a, type: kinesis, kinesis: {endpoint: 'ftp://x', secret_access_key: '${env:PLAIN}'}}]\n", []string{
			"sources[0].kinesis.stream: required", "sources[0].kinesis.region: required",
			`sources[0].kinesis.endpoint: "ftp://x" must be an http:// or https:// URL with a host`,
			"sources[0].kinesis.access_key_id: required with secret_access_key"}},
		{"pubsub", "sources: [{name: a, type: pubsub, pubsub: {subscription: 'projects/p/subscriptions/s', endpoint: 'http://e:1', max_outstanding: -1}}]\n", []string{
			"sources[0].pubsub.project: required",
			`sources[0].pubsub.subscription: "projects/p/subscriptions/s" must be an id, without spaces or '/'`,
			`sources[0].pubsub.endpoint: "http://e:1" must be host:port, without a URL scheme`,
			"sources[0].pubsub.max_outstanding: must not be negative, not -1"}},
		// the adapter's rules are the file's: a config that validates
		// starts (pubsub.Config refused these when the node started)
		{"pubsub adapter rules", "sources: [{name: a, type: pubsub, pubsub: {project: p, subscription: s1, max_outstanding: 5000}}]\n", []string{
			`sources[0].pubsub.subscription: "s1" must be an ID of 3-255 letters, digits or - _ . ~ + %, starting with a letter and not with goog`,
			"sources[0].pubsub.max_outstanding: must be at most 1000, not 5000"}},
		{"pubsub project", "sources: [{name: a, type: pubsub, pubsub: {project: '-p', subscription: goog-sub}}]\n", []string{
			`sources[0].pubsub.project: "-p" must be a project ID`,
			`sources[0].pubsub.subscription: "goog-sub" must be an ID of 3-255 letters, digits or - _ . ~ + %, starting with a letter and not with goog`}},
		{"nats required", "sources: [{name: a, type: nats, nats: {}}]\n", []string{"sources[0].nats.url: required", "sources[0].nats.stream: required"}},
		{"nats url and names", "sources: [{name: a, type: nats, nats: {url: '${env:NATS_BAD}', stream: 'a.b', consumer: 'c d', mode: pull}}]\n", []string{
			"sources[0].nats.url: entry 2 (the value from ${env:NATS_BAD}) must be nats://host:port (or tls://, ws://, wss://)",
			`sources[0].nats.stream: "a.b" must not contain spaces, '.', '*', '>' or path separators`,
			`sources[0].nats.mode: must be one of queue, stream, not "pull"`,
			`sources[0].nats.consumer: "c d" must not contain spaces, '.', '*', '>' or path separators`}},
		{"nats stream mode queue options", "sources: [{name: a, type: nats, nats: {url: 'nats://h:1', stream: S, mode: stream, consumer: c, ack_wait: 5s, max_ack_pending: 3}}]\n", []string{
			"sources[0].nats.consumer: only valid with mode: queue", "sources[0].nats.ack_wait: only valid with mode: queue", "sources[0].nats.max_ack_pending: only valid with mode: queue"}},
		// a bad entry written in the file is quoted, masked
		{"nats url literal entry", "sources: [{name: a, type: nats, nats: {url: 'nats://h:1, http://h:2', stream: S}}]\n", []string{
			`sources[0].nats.url: entry 2 ("http://h:2") must be nats://host:port (or tls://, ws://, wss://)`}},
		{"nats url two @", "sources: [{name: a, type: nats, nats: {url: '${env:NATS_AT}', stream: S}}]\n", []string{"sources[0].nats.url: entry 2: " + redact.ErrUnescapedAt.Error()}},
		{"nats auth", "sources: [{name: a, type: nats, nats: {url: 'nats://h:1', stream: S, user: u}}]\n", []string{"sources[0].nats.password: required with user"}},
		{"nats auth both", "sources: [{name: a, type: nats, nats: {url: 'nats://h:1', stream: S, user: u, password: '${env:NATS_PW}', credentials_file: /c}}]\n", []string{"sources[0].nats.credentials_file: use credentials_file or user and password, not both"}},
		{"env unset", "node: {debug_token: '${env:NOPE}'}\n" + src, []string{"node.debug_token: environment variable NOPE is not set (referenced as ${env:NOPE})"}},
		{"env bad name", "node: {debug_token: '${env:A-B}'}\n" + src, []string{`node.debug_token: ${env:A-B}: "A-B" is not an environment variable name`}},
		{"file unreadable", "cluster: {secret_key: '${file:/missing.key}'}\n" + src, []string{"cluster.secret_key: cannot read file /missing.key (referenced as ${file:/missing.key}): open /missing.key: file does not exist"}},
		{"unknown ref", "node: {name: '${vault:x}'}\n" + src, []string{"node.name: unknown reference ${vault:x}: want ${env:NAME} or ${file:PATH} (write $${ for a literal ${)"}},
		{"unterminated ref", "node: {name: 'a${env:X'}\n" + src, []string{`node.name: unterminated reference "${env:X": want ${env:NAME} or ${file:PATH}`}},
		{"env in list and int", "cluster: {join: ['${env:NOPE}:1']}\n" + src + "    batch_size: ${env:NOPE2}\n", []string{
			"cluster.join[0]: environment variable NOPE is not set (referenced as ${env:NOPE})",
			"sources[0].batch_size: environment variable NOPE2 is not set (referenced as ${env:NOPE2})"}},
		{"env empty then required", "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: '${env:EMPTY}'}}]\n", []string{"sources[0].kafka.topic: required"}},
		{"many at once", "node: {capacity: -1}\ncluster: {profile: x}\nsources:\n  - {name: a, type: kafka, kafka: {brokers: ['h:1']}}\n  - {name: b, type: kafka, kafka: {topik: t, brokers: ['h:1']}}\n", []string{
			`sources[1].kafka.topik: unknown field (did you mean "topic"?)`,
			"node.capacity: must be a number above 0 and at most cluster.max_capacity (16), not -1",
			`cluster.profile: must be one of default, fast, not "x"`,
			"sources[0].kafka.topic: required",
			"sources[1].kafka.topic: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := parse(t, tt.yaml)
			if tt.name == "yaml syntax" {
				if len(errs) != 1 || errs[0].Path != "(root)" || !strings.HasPrefix(errs[0].Msg, "invalid YAML: [1:4]") {
					t.Fatalf("errors %q", errs)
				}
				return
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	tests := []struct{ in, want string }{
		{"${env:TOKEN}", "tok-secret-1"},
		{"a-${env:TOKEN}-b-${env:EMPTY}-c", "a-tok-secret-1-b--c"},
		{"${file:/pw}", "file-secret-2"},
		{"cost $5 ${env:TOKEN}", "cost $5 tok-secret-1"},
		{"${env:TOKEN}${file:/pw}", "tok-secret-1file-secret-2"},
	}
	for _, tt := range tests {
		c, errs := parse(t, "node: {name: n1, debug_token: '"+tt.in+"'}\n"+src)
		if errs != nil {
			t.Errorf("%q: %v", tt.in, errs)
			continue
		}
		if got := c.Node.DebugToken.Reveal(); got != tt.want {
			t.Errorf("%q expanded to %q, want %q", tt.in, got, tt.want)
		}
	}
	// A value read from the environment is not expanded again.
	c, err := Parse([]byte("node: {name: '${env:X}'}\n"+src), testOptions(map[string]string{"X": "${env:Y}"}, nil))
	if err == nil || !strings.Contains(err.Error(), `node.name: the value from ${env:X} must be letters`) {
		t.Errorf("re-expansion: %v %v", c, err)
	}
}

func TestHostnameFailure(t *testing.T) {
	opts := testOptions(nil, nil)
	opts.Hostname = func() (string, error) { return "", errors.New("no uts") }
	_, err := Parse([]byte(src), opts)
	if err == nil || err.Error() != "node.name: required: the hostname is not available (no uts)" {
		t.Errorf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.yaml"); err == nil || !strings.HasPrefix(err.Error(), "(file): open testdata/does-not-exist.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
	t.Setenv("DROVER_DEBUG_TOKEN", "x")
	// The example references /etc/drover/gossip.key, which a test machine
	// does not have: Load reports it with its field.
	_, err := Load("testdata/drover.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "cluster.secret_key: cannot read file /etc/drover/gossip.key") {
		t.Errorf("Load(example) = %v", err)
	}
}

// secrets are the literal secret values of secretYAML.
var secrets = []string{"tok-secret-1", "gossip-not-printed", "pg-secret-3", "sasl-secret-6", "aws-secret-4", "aws-secret-7", "nats-secret-5", "natsurl-secret-8", "qp-secret-9", "sr-secret-10"}

const secretYAML = `
node: {name: n, debug_addr: '10.1.1.1:7070', debug_token: '${env:TOKEN}'}
cluster: {secret_key: '${env:KEY}'}
store: {url: '${env:PG_QP}'}
sources:
  - {name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, sasl: {mechanism: plain, username: u, password: '${env:SASL_PW}'}}}
  - {name: b, type: sqs, sqs: {queue_url: 'https://q/1', region: r, access_key_id: A, secret_access_key: '${env:AWS_SECRET}'}}
  - {name: c, type: kinesis, kinesis: {stream: s, region: r, access_key_id: A, secret_access_key: '${env:AWS_SECRET2}'}}
  - {name: d, type: nats, nats: {url: '${env:NATS_URL}', stream: S, user: u, password: '${env:NATS_PW}'}}
  - {name: e, type: kafka, kafka: {brokers: ['h:1'], topic: t2}, decode: {format: avro, registry: {url: 'https://sr:8081', username: key, password: '${env:SR_PW}'}}}
`

func TestSecretsNeverPrinted(t *testing.T) {
	c, errs := parse(t, secretYAML)
	if errs != nil {
		t.Fatal(errs)
	}
	// The gossip key's own bytes must not print either.
	secrets := append(secrets, gossipKey, "0123456789abcdef")
	var outs []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10.3s"} {
		outs = append(outs, fmt.Sprintf(f, c), fmt.Sprintf(f, *c), fmt.Sprintf(f, c.Sources), fmt.Sprintf(f, c.Sources[0].Kafka.SASL),
			fmt.Sprintf(f, c.Sources[4].Decoding), fmt.Sprintf(f, *c.Sources[4].Decoding.Registry), fmt.Sprintf(f, c.Sources[4]),
			fmt.Sprintf(f, *c.Sources[3].NATS), fmt.Sprintf(f, *c.Sources[0].Kafka), fmt.Sprintf(f, c.Sources[1]), fmt.Sprintf(f, c.Sources[2].Kinesis), fmt.Sprintf(f, *c.Sources[1].SQS), fmt.Sprintf(f, c.Node), fmt.Sprintf(f, c.Cluster), fmt.Sprintf(f, c.Store), fmt.Sprintf(f, c.Node.DebugToken))
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j), c.String(), c.Redacted().String(), fmt.Sprintf("%#v", c.Redacted()))
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		l := slog.New(h)
		l.Info("config", "cfg", c, "token", c.Node.DebugToken, "url", c.Store.URL, "sasl", c.Sources[0].Kafka.SASL, "node", c.Node)
	}
	outs = append(outs, logs.String())
	for _, out := range outs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("secret %q printed in:\n%s", s, out)
			}
		}
	}
	if !strings.Contains(string(j), `"debug_token":"[redacted]"`) || !strings.Contains(string(j), "postgres://drover:xxxxx@db:5432/d?password=xxxxx") {
		t.Errorf("JSON does not show redactions: %s", j)
	}
	// Redacted is a deep copy: the original keeps its secrets.
	r := c.Redacted()
	if r.Sources[0].Kafka.SASL.Password.Reveal() != Redacted || c.Sources[0].Kafka.SASL.Password.Reveal() != "sasl-secret-6" ||
		r.Sources[3].NATS.URL.Reveal() != "nats://u:xxxxx@h:4222" || c.Sources[3].NATS.URL.Reveal() != "nats://u:natsurl-secret-8@h:4222" {
		t.Errorf("Redacted copy: %v / original: %v", r.Sources[0].Kafka.SASL.Password.Reveal(), c.Sources[0].Kafka.SASL.Password.Reveal())
	}
	// Errors never quote a secret value either.
	bad := strings.ReplaceAll(secretYAML, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "gossip-not-printed")
	bad = strings.ReplaceAll(bad, "db:5432", "")
	_, err = Parse([]byte(bad), testOptions(nil, nil))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("secret %q in error %v", s, err)
		}
	}
	if Secret("").String() != "" || fmt.Sprint(Secret("")) != "" {
		t.Errorf("an unset secret prints as empty")
	}
}

func TestSecretURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sqlite:./drover.db", "sqlite:./drover.db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://u:p@h/db?sslmode=require&sslpassword=x", "postgres://u:xxxxx@h/db?sslmode=require&sslpassword=xxxxx"},
		{"nats://a:1, nats://u:p@b:2", "nats://a:1, nats://u:xxxxx@b:2"},
		{"nats://tok@b:2", "nats://xxxxx@b:2"},
		{"host=h password='p w' dbname=d", "host=h password='xxxxx' dbname=d"},
		{"postgres://u:p@h:bad port/db", "postgres://u:xxxxx@h:bad port/db"},
		{"weird:u:p@h", "weird:u:xxxxx@h"},
	}
	for _, tt := range tests {
		if got := SecretURL(tt.in).String(); got != tt.want {
			t.Errorf("SecretURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParse: whatever the input, Parse returns a config that validates or
// a non-empty Errors with paths (at most MaxErrors and a count), within
// 1 s and 100 MB, and its problems never show the text an ${env:} or
// ${file:} reference gave, unless the input holds that text itself.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 10m ./cluster/config/
func FuzzParse(f *testing.F) {
	data, _ := os.ReadFile("testdata/drover.yaml")
	for _, s := range []string{string(data), fullYAML, secretYAML, src, "", "a: [", "- 1", "sources: [{name: a, type: kafka, kafka: {}}]",
		"node: {name: '${env:X}'}", "x: &a {p: 1}\ny: *a\n", "sources: [{name: a, type: memory, memory: {}, batch_size: ${file:/x}}]",
		string(billionLaughs("? *h\n: x")), string(billionLaughs("z: *h")), "m0: &m {a: 1}\nm1: &n {<<: [*m, *m]}\nm2: {<<: [*n, *n]}\n",
		"\ufeffnode: {name: n}\n" + src, "\xff\xfen\x00:\x00", "\xfe\xff\x00n", strings.Repeat("[", 40) + strings.Repeat("]", 40),
		strings.Repeat("- ", 40) + "x", strings.Repeat("{a: ", 40) + "1" + strings.Repeat("}", 40), "node: {1: x, true: y, ~: z}\n",
		"store: {url: '${env:S}'}\n" + src, "sources: [{name: a, type: memory, memory: {}, records: {table: '${file:/s}'}}]\n",
		"store: {url: 'host=h password=p'}\n" + src, "sources: [{name: a, type: nats, nats: {url: 'nats://${env:S}@h:1', stream: '${env:S}'}}]\n",
		"---\na: 1\n---\n", "a: |\n  x\n  y\n", "? a\n: b\n", "a: !!binary aGVsbG8=\n", "a: &x b\n*x : c\n",
	} {
		f.Add([]byte(s))
	}
	const envSecret, fileSecret = "Zq9secretEnvVal", "Zq9secretFileVal"
	opts := testOptions(map[string]string{"X": "v", "S": envSecret}, map[string]string{"/x": "12\n", "/s": fileSecret + "\n"})
	f.Fuzz(func(t *testing.T, data []byte) {
		var c *Config
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		c, err = Parse(data, opts)
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		if took > time.Second {
			t.Fatalf("Parse of %d bytes took %v", len(data), took)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 100<<20 {
			t.Fatalf("Parse of %d bytes allocated %d MB", len(data), alloc>>20)
		}
		if err == nil {
			if c == nil || len(c.Sources) == 0 {
				t.Fatalf("no error and config %v", c)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("a parsed config does not validate: %v", err)
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error %T %v is not a non-empty Errors", err, err)
		}
		if len(errs) > MaxErrors+1 {
			t.Fatalf("%d problems, more than %d", len(errs), MaxErrors+1)
		}
		for _, e := range errs {
			if e.Path == "" || e.Msg == "" {
				t.Fatalf("error without path or message: %+v", e)
			}
		}
		for _, s := range []string{envSecret, fileSecret} {
			if !bytes.Contains(data, []byte(s)) && strings.Contains(err.Error(), s) {
				t.Fatalf("a problem shows what a reference gave (%s):\n%v", s, err)
			}
		}
	})
}

// A secret written in the file is refused, naming its field — also when it
// only looks like a reference ($${ is a literal "${").
func TestLiteralSecretsRefused(t *testing.T) {
	_, errs := parse(t, `
node: {name: n, debug_addr: '10.1.1.1:7070', debug_token: tok}
cluster: {secret_key: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}
store: {url: 'postgres://drover:pw@db:5432/d'}
sources:
  - {name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, sasl: {mechanism: plain, username: u, password: 'pw'}}}
  - {name: b, type: sqs, sqs: {queue_url: 'https://q/1', region: r, access_key_id: A, secret_access_key: '$${env:X}'}}
  - {name: c, type: nats, nats: {url: 'nats://u:pw@h:4222', stream: S}}
  - {name: d, type: nats, nats: {url: 'nats://u@h:4222', stream: S, user: u, password: '${env:NATS_PW}'}}
`)
	want := []string{
		"node.debug_token: a secret must come from",
		"cluster.secret_key: a secret must come from",
		"store.url: the password must come from",
		"sources[0].kafka.sasl.password: a secret must come from",
		"sources[1].sqs.secret_access_key: a secret must come from",
		"sources[2].nats.url: the password must come from",
		// NATS takes a user name alone in the URL for a token
		"sources[3].nats.url: the password must come from",
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d: %q, want prefix %q", i, errs[i], w)
		}
	}
}

// Issue 9, item 6b: a cluster section with an empty join list (or one
// naming only this node) is valid but warned about; no cluster section is
// a single node and is not.
func TestWarningsAboutTheJoinList(t *testing.T) {
	const rest = "node: {name: n1}\nsources: [{name: orders, type: kafka, kafka: {brokers: [\"127.0.0.1:9092\"], topic: orders}}]\n"
	for _, c := range []struct {
		cluster string
		want    string // "" no warning
	}{
		{"", ""},
		{"cluster: {profile: fast}\n", "empty"},
		{"cluster: {bind: 0.0.0.0:7946, advertise: 10.0.0.7:7946, join: [10.0.0.7:7946], secret_key: '${env:KEY}'}\n", "lists only this node"},
		{"cluster: {bind: 127.0.0.1:7946, join: [127.0.0.1:7947]}\n", ""},
	} {
		cfg, err := Parse([]byte(rest+c.cluster), testOptions(map[string]string{"KEY": gossipKey}, nil))
		if err != nil {
			t.Fatalf("%q: %v", c.cluster, err)
		}
		w := cfg.Warnings()
		switch {
		case c.want == "" && len(w) > 0:
			t.Errorf("%q: warnings %v", c.cluster, w)
		case c.want != "" && (len(w) != 1 || w[0].Path != "cluster.join" || !strings.HasPrefix(w[0].Msg, c.want) ||
			!strings.Contains(w[0].Msg, "forms a cluster of its own") || !strings.Contains(w[0].Msg, "every seed")):
			t.Errorf("%q: warnings %v, want one on cluster.join starting %q", c.cluster, w, c.want)
		}
	}
}
