package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/brokers/kinesis"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/brokers/nats"
	"github.com/drover-dev/drover/brokers/pubsub"
	"github.com/drover-dev/drover/brokers/sqs"
	"github.com/drover-dev/drover/cluster/config"
)

// OpenSource opens a source's broker by its type. NATS, Pub/Sub, SQS and
// Kinesis sources are opened on first use (see lazy.go), as the Kafka
// client connects on first use: a broker that is down when the node starts
// leaves the node up, its source or units retrying with the broker's
// error. Their configuration is validated here, so that a config error
// fails Start.
func OpenSource(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	switch s.Type {
	case config.TypeMemory:
		return openMemory(s)
	case config.TypeKafka:
		return openKafka(s, log)
	case config.TypeNATS:
		return openNATS(ctx, s, log)
	case config.TypePubSub:
		return openPubSub(ctx, s, log)
	case config.TypeSQS:
		return openSQS(ctx, s, log)
	case config.TypeKinesis:
		return openKinesis(ctx, s, log)
	}
	return Source{}, fmt.Errorf("type %q: unknown source type", s.Type)
}

// openMemory is an in-process broker: only useful for a single node (tests,
// trying a config), since each process has its own.
func openMemory(s config.Source) (Source, error) {
	if s.Memory != nil && s.Memory.Queue {
		q, err := memory.NewQueue(memory.QueueConfig{})
		return Source{Queue: q}, err
	}
	parts := 1
	if s.Memory != nil && s.Memory.Partitions > 0 {
		parts = s.Memory.Partitions
	}
	st, err := memory.NewStream(memory.StreamConfig{Partitions: parts})
	return Source{Stream: st}, err
}

func openKafka(s config.Source, log *slog.Logger) (Source, error) {
	cfg := *s.Kafka // the adapter's own Config, read from the file
	cfg.Logger = log
	st, err := kafka.New(cfg)
	if err != nil {
		return Source{}, err
	}
	if cfg.CommitToGroup == "" {
		return Source{Stream: noCommit{Stream: st, r: st}}, nil
	}
	return Source{Stream: st}, nil
}

// noCommit is a Kafka stream without commit_to_group, handed to the
// runtime without brokers.Committer: the runtime records its position in
// any stream that is a Committer (every unit, about once a second), and
// the adapter's Committed fails when no group is configured, which the
// unit logged as a WARN each time. It keeps the stream's methods,
// brokers.Resolver, brokers.Seeker and brokers.StreamIdentifier, the other
// interfaces the runtime looks for.
type noCommit struct {
	brokers.Stream
	r interface {
		brokers.Resolver
		brokers.Seeker
		brokers.StreamIdentifier
	}
}

var (
	_ brokers.Resolver         = noCommit{}
	_ brokers.Seeker           = noCommit{}
	_ brokers.StreamIdentifier = noCommit{}
)

func (s noCommit) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	return s.r.Resolve(ctx, partition, mode)
}

func (s noCommit) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	return s.r.PositionAt(ctx, partition, t)
}

func (s noCommit) StreamID(ctx context.Context, partition string) (string, error) {
	return s.r.StreamID(ctx, partition)
}

func openNATS(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	n := *s.NATS // the adapter's own SourceConfig, read from the file
	n.Logger = log
	if n.Mode == nats.ModeStream {
		cfg, err := n.StreamConfig()
		if err != nil {
			return Source{}, err
		}
		return lazyOpenStream("nats stream "+cfg.Stream, log, false, func(ctx context.Context) (*nats.Stream, error) {
			return nats.NewStream(ctx, cfg)
		}), nil
	}
	// the source's start is where a consumer the adapter creates begins
	cfg, err := n.QueueConfig(s.StartMode())
	if err != nil {
		return Source{}, err
	}
	return lazyOpenQueue("nats consumer "+cfg.Stream+"/"+cfg.Durable, log, func(ctx context.Context) (*nats.Queue, error) {
		return nats.NewQueue(ctx, cfg)
	}), nil
}

func openPubSub(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	cfg := *s.PubSub // the adapter's own Config, read from the file
	cfg.Logger = log
	// A deliberate translation: the file has no insecure setting. An
	// endpoint is an emulator, spoken to in plain text and without
	// authentication unless a credentials_file is given; with no
	// endpoint, PUBSUB_EMULATOR_HOST names one as the client library
	// reads it, and the same rule applies to it.
	if cfg.Endpoint == "" {
		cfg.Endpoint = os.Getenv("PUBSUB_EMULATOR_HOST")
	}
	cfg.Insecure = cfg.Endpoint != "" && cfg.CredentialsFile == ""
	if err := cfg.Validate(); err != nil {
		return Source{}, err
	}
	return lazyOpenQueue("pubsub subscription "+cfg.Subscription, log, func(ctx context.Context) (*pubsub.Queue, error) {
		return pubsub.NewQueue(ctx, cfg)
	}), nil
}

func openSQS(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	cfg := *s.SQS // the adapter's own Config, read from the file
	cfg.Logger = log
	if err := cfg.Validate(); err != nil {
		return Source{}, err
	}
	return lazyOpenQueue("sqs queue "+cfg.QueueURL, log, func(ctx context.Context) (*sqs.Queue, error) {
		return sqs.NewQueue(ctx, cfg)
	}), nil
}

func openKinesis(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	cfg := *s.Kinesis // the adapter's own Config, read from the file
	cfg.Logger = log
	if err := cfg.Validate(); err != nil {
		return Source{}, err
	}
	return lazyOpenStream("kinesis stream "+cfg.StreamName, log, true, func(ctx context.Context) (*kinesis.Stream, error) {
		return kinesis.NewStream(ctx, cfg)
	}), nil
}
