package testkit

import (
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/workload"
)

// The seeded workload and the expectation it implies live in
// internal/workload, below both the testkit and `drover demo` (which ships
// in the binary and must not import the testkit). They are re-exported here
// for the testkit's users.

// Workload makes a seeded mix of messages of every kind drover handles;
// see workload.Workload.
type Workload = workload.Workload

// Kind names the kind of a workload message.
type Kind = workload.Kind

// Sent is a message as produced, with the partition it went to.
type Sent = workload.Sent

// Expected is what a records-mode source must leave in the store after
// applying every message.
type Expected = workload.Expected

// NewWorkload returns a workload seeded with seed.
func NewWorkload(seed uint64) *Workload { return workload.New(seed) }

// The kinds of workload messages.
const (
	KindUpsert  = workload.KindUpsert
	KindDelete  = workload.KindDelete
	KindBad     = workload.KindBad
	KindUnkeyed = workload.KindUnkeyed
)

// Expect works out what the store must hold after a records-mode source
// decoded with dc applied msgs; see workload.Expect.
func Expect(dc decode.Config, msgs []Sent) (Expected, error) { return workload.Expect(dc, msgs) }

// PartitionOf spreads keys over n partitions the way a keyed producer
// would; see workload.PartitionOf.
func PartitionOf(m brokers.Message, n int) string { return workload.PartitionOf(m, n) }
