package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
)

// OpenSource opens a source's broker by its type.
func OpenSource(ctx context.Context, s config.Source, log *slog.Logger) (Source, error) {
	switch s.Type {
	case config.TypeMemory:
		return openMemory(s)
	case config.TypeKafka:
		return openKafka(s, log)
	}
	return Source{}, fmt.Errorf("type %q: no adapter in this build", s.Type)
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
	k := s.Kafka
	cfg := kafka.Config{
		Brokers: k.Brokers, Topic: k.Topic, ClientID: k.ClientID, FetchMaxBytes: int32(k.FetchMaxBytes),
		CommitToGroup: k.CommitToGroup, Logger: log,
	}
	if k.TLS != nil {
		cfg.TLS = kafka.TLS{Enable: k.TLS.Enabled, CAFile: k.TLS.CAFile, CertFile: k.TLS.CertFile, KeyFile: k.TLS.KeyFile,
			InsecureSkipVerify: k.TLS.InsecureSkipVerify}
	}
	if k.SASL != nil {
		cfg.SASL = kafka.SASL{Mechanism: k.SASL.Mechanism, User: k.SASL.Username, Password: k.SASL.Password.Reveal()}
	}
	st, err := kafka.New(cfg)
	if err != nil {
		return Source{}, err
	}
	return Source{Stream: st}, nil
}
