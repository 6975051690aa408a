package node_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/internal/kinesistest"
	"github.com/drover-dev/drover/persistence"
)

// e2eKPLAggregates is how many KPL aggregates the stream carries, each of
// e2eKPLUsers user records and followed by e2eKPLPlain plain records.
const (
	e2eKPLAggregates = 150
	e2eKPLUsers      = 7
	e2eKPLPlain      = 2
)

// Kinesis KPL aggregates end to end on kinesalite: two shards, each
// carrying aggregates of 7 user records, each followed by 2 plain
// records. batch_size 50 does not divide the 9 messages of such a group,
// so checkpoints fall inside aggregates; node 1 is killed when both
// shards' checkpoints are inside one (a sub-position whose index is not
// the aggregate's last), and node 2 must resume after the last applied
// user record: every user record and plain record applied exactly once,
// in order.
func TestE2EKinesisKPL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep, c, name := e2eKinesisStream(ctx, t, "drover-e2e-kpl")

	// A record's shard is the top bit of the MD5 of its partition key (two
	// shards split the hash key range in halves): group g goes to shard g%2,
	// so that each shard holds whole groups, aggregate first.
	keyFor := func(g, i int) string {
		for n := 0; ; n++ {
			k := fmt.Sprintf("g%d-r%d-%d", g, i, n)
			if sum := md5.Sum([]byte(k)); int(sum[0]>>7) == g%2 {
				return k
			}
		}
	}
	var recs []brokers.Message
	var users [][]kinesistest.UserRecord // per record: its user records; nil for a plain one
	for g := range e2eKPLAggregates {
		urs := make([]kinesistest.UserRecord, e2eKPLUsers)
		for i := range urs {
			urs[i] = kinesistest.UserRecord{PartitionKey: fmt.Sprintf("user-%d", i%3), Data: fmt.Appendf(nil, `{"id":"a%d-%d"}`, g, i)}
		}
		recs = append(recs, brokers.Message{Key: []byte(keyFor(g, 0)), Value: kinesistest.Aggregate(urs...)})
		users = append(users, urs)
		for p := range e2eKPLPlain {
			recs = append(recs, brokers.Message{Key: []byte(keyFor(g, 1+p)), Value: fmt.Appendf(nil, `{"id":"p%d-%d"}`, g, p)})
			users = append(users, nil)
		}
	}
	var sent []e2eMsg
	aggs := map[string]bool{} // sequence numbers of the aggregates
	shards := map[string]int{}
	done := 0
	err := awstest.PutKinesis(ctx, c, name, "", recs, func(chunk []brokers.Message, answers []kintypes.PutRecordsResultEntry) error {
		for i, a := range answers {
			seq, shard := aws.ToString(a.SequenceNumber), aws.ToString(a.ShardId)
			shards[shard]++
			urs := users[done+i]
			if urs == nil {
				m := chunk[i]
				m.Position = seq
				sent = append(sent, e2eMsg{Part: shard, Msg: m})
				continue
			}
			aggs[seq] = true
			for j, u := range urs {
				sent = append(sent, e2eMsg{Part: shard, Msg: brokers.Message{Position: brokers.SubPosition(seq, j), Key: []byte(u.PartitionKey), Value: u.Data}})
			}
		}
		done += len(answers)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2 {
		t.Fatalf("records went to shards %v: want both shards used", shards)
	}
	t.Logf("put %d records (%d aggregates) to shards %v: %d messages to apply", len(recs), len(aggs), shards, len(sent))

	aud := &e2eSource{Name: "kin-kpl", Audit: true, Sent: sent}
	units := make([]string, 0, len(shards))
	for shard := range shards {
		units = append(units, aud.Name+"/"+shard)
	}
	sort.Strings(units)
	// inside reports whether any (all: every) shard's checkpoint is a user record of
	// an aggregate other than its last, and says where each shard is.
	inside := func(ctx context.Context, st persistence.Store, all bool) (bool, string) {
		cps, err := st.Checkpoints(ctx, aud.Name)
		if err != nil {
			return false, err.Error()
		}
		at := map[string]string{}
		for _, cp := range cps {
			at[cp.Unit] = cp.Position
		}
		n := 0
		var where []string
		for _, u := range units {
			seq, sub := brokers.SplitPosition(at[u])
			in := aggs[seq] && sub >= 0 && sub < e2eKPLUsers-1
			if in {
				n++
			}
			where = append(where, fmt.Sprintf("%s at %q (inside an aggregate: %v)", u, at[u], in))
		}
		ok := n > 0
		if all {
			ok = n == len(units)
		}
		return ok, strings.Join(where, ", ")
	}
	killed := false
	t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
	section := e2eKinesisSection(name, ep)
	runE2E(t, e2eRun{
		StoreURL:    e2eSQLiteURL(t),
		Sources:     []*e2eSource{aud},
		SourcesYAML: aud.YAML("kinesis", section),
		// Kill when both shards are inside an aggregate; after the kill at
		// least one must still be (the node may have committed one more
		// batch in between).
		KillWhen: func(ctx context.Context, st persistence.Store) (bool, string) {
			ok, why := inside(ctx, st, !killed)
			killed = killed || ok
			return ok, why
		},
	})
}
