package config

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/brokers/kinesis"
	"github.com/drover-dev/drover/brokers/nats"
	"github.com/drover-dev/drover/brokers/pubsub"
	"github.com/drover-dev/drover/brokers/sqs"
)

// Defaults.
const (
	DefaultDebugAddr              = "127.0.0.1:7070"
	DefaultBind                   = "127.0.0.1:7946"
	DefaultStoreURL               = "sqlite:./drover.db"
	DefaultDedupeRetention        = 168 * time.Hour
	DefaultStoreTimeout           = 10 * time.Second // postgres.DefaultTimeout, sqlite.DefaultTimeout
	MinStoreTimeout               = 10 * time.Millisecond
	DefaultBatchSize              = 500
	DefaultMaxWait                = time.Second
	DefaultMaxConsecutiveFailures = 5
	DefaultSlots                  = 1
	DefaultMaxMessageBytes        = 1 << 20
	DefaultBatchBytes             = 16 << 20  // actors.DefaultBatchBytes
	DefaultDeadLetterMaxBytes     = 256 << 10 // decode.DefaultMaxDeadLetterBytes
	DefaultLeaseTTL               = 10 * time.Second
	DefaultDiscoveryInterval      = 30 * time.Second
	DefaultSeekExpiry             = 5 * time.Minute // actors.DefaultSeekExpiry
	DefaultSQSWait                = sqs.DefaultWaitTime
	DefaultSQSVisibilityTimeout   = sqs.DefaultVisibilityTimeout
	DefaultMaxCapacity            = placement.DefaultMaxCapacity
)

// Source types.
const (
	TypeKafka   = "kafka"
	TypeKinesis = "kinesis"
	TypeSQS     = "sqs"
	TypePubSub  = "pubsub"
	TypeNATS    = "nats"
	TypeMemory  = "memory"
)

// Config is a node's configuration file (architecture §9). Parse fills every
// default; secret fields are of type Secret or SecretURL, which never print
// their value.
type Config struct {
	Node    Node     `yaml:"node" json:"node"`
	Cluster Cluster  `yaml:"cluster" json:"cluster"`
	Store   Store    `yaml:"store" json:"store"`
	Log     Log      `yaml:"log" json:"log"`
	Sources []Source `yaml:"sources" json:"sources"`

	// warnings are what Parse found dubious but valid (see Warnings).
	warnings []FieldError
}

// Node is the node section.
type Node struct {
	Name      string `yaml:"name" json:"name"`             // default: the hostname
	DebugAddr string `yaml:"debug_addr" json:"debug_addr"` // default 127.0.0.1:7070
	// DebugToken is the bearer token of the debug endpoint; required when
	// DebugAddr is not a loopback address.
	DebugToken Secret `yaml:"debug_token" json:"debug_token"`
	// AdminToken, when set, is the only token the debug endpoint's
	// controls (POST /debug/control/…: pause, resume, seek, drain,
	// undrain, reload) accept; the read token (DebugToken) then only
	// reads. Empty: the controls take DebugToken.
	AdminToken Secret  `yaml:"admin_token" json:"admin_token,omitempty"`
	Capacity   float64 `yaml:"capacity" json:"capacity"` // placement weight, default 1, at most cluster.max_capacity
	// DebugTLS makes the debug endpoint serve HTTPS; zero: plain HTTP.
	DebugTLS DebugTLS `yaml:"debug_tls" json:"debug_tls,omitzero"`
	// MetricsPerUnit adds the per-unit counters (drover_unit_received_total
	// and six more) beside the per-source ones; off, a unit has three
	// series (its lag in messages and in seconds, and its state).
	MetricsPerUnit bool `yaml:"metrics_per_unit" json:"metrics_per_unit,omitempty"`
	// GroupCommit lets the batches of several units that are ready while
	// the store is busy share one store call (persistence.GroupApplier:
	// one pipeline on PostgreSQL, one transaction on SQLite); false
	// applies every batch alone. Default true.
	GroupCommit bool `yaml:"group_commit" json:"group_commit"`
	// SeekExpiry bounds how long a seek asked through the controls table
	// (drover seek of a unit another node, or nobody, holds) waits for
	// its unit's owner: an older one is never carried out, it is marked
	// done with an error saying it expired (default 5m, 10s to 24h).
	SeekExpiry time.Duration `yaml:"seek_expiry" json:"seek_expiry"`
	// GCTuning is how drover node sets the Go collector's GOGC: adaptive
	// (the default) keeps it low while the node allocates little (idle
	// units: less resident heap) and at Go's default under load
	// (internal/gctune); off leaves the runtime's own. Either way a GOGC
	// or GOMEMLIMIT in the environment wins: the tuner stays off.
	GCTuning string `yaml:"gc_tuning" json:"gc_tuning"`
}

// DebugTLS is node.debug_tls: paths of PEM files, never their content (so
// the key never enters the configuration, and nothing here is secret).
type DebugTLS struct {
	// Cert and Key are the endpoint's certificate (chain) and private key;
	// both or neither. The certificate must name the address the others
	// reach the endpoint at (an IP SAN for an IP address).
	Cert string `yaml:"cert" json:"cert,omitempty"`
	Key  string `yaml:"key" json:"key,omitempty"`
	// CA verifies the other members' HTTPS endpoints in the cluster view;
	// empty: the system's roots.
	CA string `yaml:"ca" json:"ca,omitempty"`
}

// Cluster is the cluster section.
type Cluster struct {
	Bind      string   `yaml:"bind" json:"bind"`           // default 127.0.0.1:7946
	Advertise string   `yaml:"advertise" json:"advertise"` // host:port others reach us at; empty: memberlist derives it from Bind
	Join      []string `yaml:"join" json:"join"`           // seeds: every node's address, this one's included; empty: warned about (Warnings)
	Profile   string   `yaml:"profile" json:"profile"`     // default | fast
	// SecretKey is base64 of exactly 32 bytes (gossip encryption); empty:
	// gossip is not encrypted. Key returns the bytes.
	SecretKey Secret `yaml:"secret_key" json:"secret_key"`
	// MaxCapacity is the most placement weight any member counts with,
	// whatever capacity it gossips: above 0, at most placement.MaxCapacity
	// (1000), default DefaultMaxCapacity (16). Each node gossips it, and
	// placement clamps with the smallest value an alive member gossips
	// (placement.EffectiveMaxCapacity), so nodes with different values (a
	// rolling change) still place units alike.
	MaxCapacity float64 `yaml:"max_capacity" json:"max_capacity"`
}

// Key returns the decoded gossip key, nil when none is set. Parse has
// checked it.
func (c Cluster) Key() []byte {
	if c.SecretKey == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.SecretKey.Reveal()))
	if err != nil {
		return nil
	}
	return b
}

// Store is the store section.
type Store struct {
	// URL is postgres://… (or postgresql://…) or sqlite:PATH; default
	// sqlite:./drover.db.
	URL             SecretURL     `yaml:"url" json:"url"`
	DedupeRetention time.Duration `yaml:"dedupe_retention" json:"dedupe_retention"` // default 168h
	// Timeout bounds every store call (a lease renewal, a batch with its
	// handler, a read); for PostgreSQL it also sets each session's
	// lock_timeout (half of it), statement_timeout and
	// idle_in_transaction_session_timeout, so that a transaction left by
	// a vanished node is ended by the server; for SQLite it is the
	// busy_timeout. Default 10s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// MaxConns caps the PostgreSQL connection pool; 0 (the default): the
	// greater of 4 and the number of CPUs, or pool_max_conns from the URL.
	// SQLite always uses one connection per node.
	MaxConns int `yaml:"max_conns" json:"max_conns"`
}

// Log is the log section.
type Log struct {
	Format string `yaml:"format" json:"format"` // text (default) | json
	Level  string `yaml:"level" json:"level"`   // debug | info (default) | warn | error
}

// SlogLevel is Level as a slog.Level.
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Source is one entry of sources. Exactly the sub-section named by Type is
// set. Besides architecture §9's rules, Validate requires LeaseTTL to be
// longer than MaxWait. Leases are renewed by the node's leaser apart from
// fetches (architecture §14), so the rule is no longer what keeps a lease
// through a long fetch; it stays so that a fetch never outlasts a lease,
// and configurations valid before stay valid.
type Source struct {
	Name  string `yaml:"name" json:"name"`   // unique, [a-z0-9_-]+
	Type  string `yaml:"type" json:"type"`   // kafka | kinesis | sqs | pubsub | nats | memory
	Start string `yaml:"start" json:"start"` // earliest (default) | latest
	// OnPositionReset: what a stream unit does when its checkpoint is no
	// longer a position of the broker (retention deleted it, the topic was
	// recreated): earliest (default) | latest | fail.
	OnPositionReset string `yaml:"on_position_reset" json:"on_position_reset"`
	Mode            string `yaml:"mode" json:"mode"` // records (default) | handler
	// HandlerName names the registered Go handler of a mode: handler source.
	HandlerName string  `yaml:"handler_name" json:"handler_name,omitempty"`
	Records     Records `yaml:"records" json:"records"`
	// Decoding is the decode section: how message bodies are written.
	Decoding               Decoding      `yaml:"decode" json:"decode"`
	BatchSize              int           `yaml:"batch_size" json:"batch_size"`                             // default 500, 1..10000
	MaxWait                time.Duration `yaml:"max_wait" json:"max_wait"`                                 // default 1s
	MaxConsecutiveFailures int           `yaml:"max_consecutive_failures" json:"max_consecutive_failures"` // default 5
	Slots                  int           `yaml:"slots" json:"slots"`                                       // queues only, default 1, 1..256
	MaxMessageBytes        int           `yaml:"max_message_bytes" json:"max_message_bytes"`               // default 1 MiB
	// BatchBytes bounds a batch by bytes as well as by count: the
	// messages of a fetch are applied in batches of at most that many
	// bytes, in order. Default 16 MiB, at least max_message_bytes; at
	// most what the store takes in one statement (512 MiB for
	// PostgreSQL).
	BatchBytes int `yaml:"batch_bytes" json:"batch_bytes"`
	// DeadLetterMaxBytes is the most bytes of a body a dead letter keeps;
	// a longer one is cut (and cannot be replayed). Default 256 KiB, at
	// most batch_bytes.
	DeadLetterMaxBytes int           `yaml:"dead_letter_max_bytes" json:"dead_letter_max_bytes"`
	LeaseTTL           time.Duration `yaml:"lease_ttl" json:"lease_ttl"`                   // default 10s
	DiscoveryInterval  time.Duration `yaml:"discovery_interval" json:"discovery_interval"` // default 30s

	// The broker sections. Every one but memory is its adapter's own
	// config: the adapter describes, checks and defaults its settings
	// (architecture §9).
	Kafka   *kafka.Config      `yaml:"kafka" json:"kafka,omitempty"`
	Kinesis *kinesis.Config    `yaml:"kinesis" json:"kinesis,omitempty"`
	SQS     *sqs.Config        `yaml:"sqs" json:"sqs,omitempty"`
	PubSub  *pubsub.Config     `yaml:"pubsub" json:"pubsub,omitempty"`
	NATS    *nats.SourceConfig `yaml:"nats" json:"nats,omitempty"`
	Memory  *Memory            `yaml:"memory" json:"memory,omitempty"`
}

// IsQueue reports whether the source is a queue (competing consumer slots)
// rather than a stream (partitions with checkpoints).
func (s Source) IsQueue() bool {
	switch s.Type {
	case TypeSQS, TypePubSub:
		return true
	case TypeNATS:
		return s.NATS != nil && s.NATS.IsQueue()
	case TypeMemory:
		return s.Memory != nil && s.Memory.Queue
	}
	return false
}

// StartMode is Start as a brokers.StartMode.
func (s Source) StartMode() brokers.StartMode {
	if s.Start == "latest" {
		return brokers.Latest
	}
	return brokers.Earliest
}

// Decode is the decode configuration of the source, without its
// registry client (the node makes one per registry: NewRegistry).
func (s Source) Decode() decode.Config {
	return decode.Config{KeyField: s.Records.Key, MaxBytes: s.MaxMessageBytes, MaxDeadLetterBytes: s.DeadLetterMaxBytes,
		Format: decode.Format(s.Decoding.Format)}
}

// Decoding is a source's decode section (architecture §7).
type Decoding struct {
	// Format is json (the default), or avro, protobuf or json_schema: the
	// Confluent wire format (magic byte 0, 4-byte schema id, for Protobuf
	// the message-index list) with the schema from Registry.
	Format string `yaml:"format" json:"format"`
	// Registry is the schema registry of a wire format; required for
	// those, refused for json.
	Registry *Registry `yaml:"registry" json:"registry,omitempty"`
}

// Registry is decode.registry: a Confluent-compatible schema registry.
type Registry struct {
	URL      string `yaml:"url" json:"url"` // http(s)://host:port, no credentials in it
	Username string `yaml:"username" json:"username,omitempty"`
	// Password is sent with Username as HTTP basic authentication; give it
	// with ${env:} or ${file:}.
	Password Secret `yaml:"password" json:"password,omitempty"`
}

// Format: see Node.Format.
func (r Registry) Format(f fmt.State, verb rune) {
	type view Registry
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(r))
}

// NewRegistry is a client of the section's registry (brokers/kafka's, on
// franz-go's pkg/sr) with its schema cache; nil for json.
func (d Decoding) NewRegistry() (*decode.Registry, error) {
	rc := d.RegistryConfig()
	if rc == nil {
		return nil, nil
	}
	src, err := kafka.NewSchemaRegistry(*rc)
	if err != nil {
		return nil, err
	}
	return decode.NewRegistryFrom(rc.URL, src, rc.Timeout), nil
}

// RegistryConfig is the registry client's configuration, nil for json.
func (d Decoding) RegistryConfig() *kafka.RegistryConfig {
	if d.Registry == nil {
		return nil
	}
	return &kafka.RegistryConfig{URL: d.Registry.URL, Username: d.Registry.Username, Password: d.Registry.Password}
}

// Records is the records section of a mode: records source.
type Records struct {
	// Table defaults to the source name with '-' replaced by '_'.
	Table string `yaml:"table" json:"table"`
	// Key is the dotted path of the record key; empty: the message key.
	Key string `yaml:"key" json:"key,omitempty"`
	// Schema declares field types for quality windows ("id:int, name:text").
	Schema string `yaml:"schema" json:"schema,omitempty"`
	// Declared is Schema parsed.
	Declared quality.Schema `yaml:"-" json:"-"`
}

// Kafka isolation levels.
const (
	KafkaReadCommitted   = kafka.ReadCommitted
	KafkaReadUncommitted = kafka.ReadUncommitted
)

// NATS modes.
const (
	NATSQueue  = nats.ModeQueue
	NATSStream = nats.ModeStream
)

// Memory is an in-memory source (the demo and the simulator): a stream of
// Partitions partitions, or a queue.
type Memory struct {
	Partitions int  `yaml:"partitions" json:"partitions,omitempty"` // stream; default 1
	Queue      bool `yaml:"queue" json:"queue,omitempty"`
}

// Options are the outside world Parse may look at. Zero fields mean the
// process's own: os.LookupEnv, os.Hostname, and for ReadFile a read of a
// regular file that stops after MaxFileRefBytes (more is an error). What
// ReadFile returns beyond MaxFileRefBytes is refused too.
type Options struct {
	LookupEnv func(name string) (string, bool)
	ReadFile  func(path string) ([]byte, error)
	Hostname  func() (string, error)
}

func (o Options) withDefaults() Options {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ReadFile == nil {
		o.ReadFile = readFileRef
	}
	if o.Hostname == nil {
		o.Hostname = os.Hostname
	}
	return o
}

// Load reads and parses a config file with the process's environment,
// files and hostname. It reads at most MaxConfigBytes: a larger file (or
// /dev/zero) is refused without being read further.
func Load(path string) (*Config, error) {
	data, err := readLimited(path, MaxConfigBytes, false)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, Errors{{Path: "(file)", Msg: fmt.Sprintf("%s is larger than %d bytes (1 MiB), the most a config may be", path, MaxConfigBytes)}}
	case err != nil:
		return nil, Errors{{Path: "(file)", Msg: err.Error()}}
	}
	return Parse(data, Options{})
}

// Redacted returns a deep copy of c whose secret fields hold "[redacted]"
// (set secrets) and whose URLs have their passwords masked, safe to print
// or log in any form.
func (c *Config) Redacted() *Config {
	r := *c
	r.Node.DebugToken = Secret(r.Node.DebugToken.String())
	r.Node.AdminToken = Secret(r.Node.AdminToken.String())
	r.Cluster.SecretKey = Secret(r.Cluster.SecretKey.String())
	r.Cluster.Join = append([]string(nil), c.Cluster.Join...)
	r.Store.URL = SecretURL(r.Store.URL.String())
	r.Sources = make([]Source, len(c.Sources))
	for i, s := range c.Sources {
		s.Records.Declared = append(quality.Schema(nil), s.Records.Declared...)
		if s.Decoding.Registry != nil {
			g := *s.Decoding.Registry
			g.Password = Secret(g.Password.String())
			s.Decoding.Registry = &g
		}
		if s.Kafka != nil {
			k := *s.Kafka
			k.Brokers = append([]string(nil), k.Brokers...)
			k.SASL.Password = Secret(k.SASL.Password.String())
			s.Kafka = &k
		}
		if s.NATS != nil {
			n := *s.NATS
			n.URL = SecretURL(n.URL.String())
			n.Password = Secret(n.Password.String())
			s.NATS = &n
		}
		if s.SQS != nil {
			q := *s.SQS
			q.SecretAccessKey = Secret(q.SecretAccessKey.String())
			q.SessionToken = Secret(q.SessionToken.String())
			s.SQS = &q
		}
		if s.Kinesis != nil {
			k := *s.Kinesis
			k.SecretAccessKey = Secret(k.SecretAccessKey.String())
			k.SessionToken = Secret(k.SessionToken.String())
			s.Kinesis = &k
		}
		if s.PubSub != nil {
			p := *s.PubSub
			s.PubSub = &p
		}
		if s.Memory != nil {
			m := *s.Memory
			s.Memory = &m
		}
		r.Sources[i] = s
	}
	return &r
}

// String is the config as indented JSON, secrets redacted.
func (c *Config) String() string {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}

// Format prints the section whatever the verb with its secrets masked: fmt
// would print a *Node, *Cluster or *Store nested in another value with %s
// or %q through a path that skips the methods of the Secret fields inside.
func (n Node) Format(f fmt.State, verb rune) {
	type view Node
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(n))
}

// Format: see Node.Format.
func (c Cluster) Format(f fmt.State, verb rune) {
	type view Cluster
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(c))
}

// Format: see Node.Format.
func (s Store) Format(f fmt.State, verb rune) {
	type view Store
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(s))
}
