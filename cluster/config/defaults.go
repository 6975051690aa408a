package config

import (
	"strings"

	"github.com/drover-dev/drover/brokers/nats"
	"github.com/drover-dev/drover/brokers/sqs"
)

// Defaults, in one place: what a section holds before the file is read
// (setDefaults: the file's values override them), and what depends on
// other fields once a section is read (finish). A broker section with no
// default here (kafka, kinesis, pubsub) means its adapter's: its zero
// values are the adapter's defaults, filled by the adapter.

func defaultConfig() *Config {
	return &Config{
		Node:    Node{DebugAddr: DefaultDebugAddr, Capacity: 1, GroupCommit: true, SeekExpiry: DefaultSeekExpiry, GCTuning: "adaptive"},
		Cluster: Cluster{Bind: DefaultBind, Profile: "default", MaxCapacity: DefaultMaxCapacity},
		Store:   Store{URL: DefaultStoreURL, DedupeRetention: DefaultDedupeRetention, Timeout: DefaultStoreTimeout},
		Log:     Log{Format: "text", Level: "info"},
	}
}

// setDefaults fills the defaults of a section about to be read into p.
func setDefaults(p any) {
	switch s := p.(type) {
	case *Source:
		*s = Source{
			Start: "earliest", OnPositionReset: "earliest", Mode: "records", BatchSize: DefaultBatchSize, MaxWait: DefaultMaxWait,
			MaxConsecutiveFailures: DefaultMaxConsecutiveFailures, Slots: DefaultSlots,
			MaxMessageBytes: DefaultMaxMessageBytes, LeaseTTL: DefaultLeaseTTL, DiscoveryInterval: DefaultDiscoveryInterval,
			BatchBytes: DefaultBatchBytes, DeadLetterMaxBytes: DefaultDeadLetterMaxBytes,
			Decoding: Decoding{Format: "json"},
		}
	case *sqs.Config:
		s.WaitTime, s.VisibilityTimeout = sqs.DefaultWaitTime, sqs.DefaultVisibilityTimeout
	case *nats.SourceConfig:
		s.Mode = NATSQueue
	}
}

// finish completes the section p, read from o: the defaults that depend
// on other fields, and what is found out about the section as a whole.
func (r *reader) finish(o *obj, p any) {
	switch s := p.(type) {
	case *Config:
		if s.Node.Name == "" && !r.errs.covers("node.name") {
			h, err := r.opts.Hostname()
			if err != nil {
				r.fail("node.name", "required: the hostname is not available (%v)", err)
			}
			s.Node.Name = h
		}
		if o.has("cluster") {
			s.warnings = append(s.warnings, s.Cluster.warnings()...)
		}
	case *Records:
		s.Table = strings.TrimSpace(s.Table)
	case *Memory:
		if !s.Queue && s.Partitions == 0 && !o.has("partitions") {
			s.Partitions = 1
		}
	case *Source:
		if n := s.NATS; n != nil && n.IsQueue() && n.Consumer == "" && s.Name != "" {
			n.Consumer = "drover-" + s.Name
		}
		if s.Mode == "records" && s.Records.Table == "" && s.Name != "" {
			s.Records.Table = strings.ReplaceAll(s.Name, "-", "_")
		}
	}
}
