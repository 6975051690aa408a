package demo

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/internal/kinesistest"
)

const reshardSecretEnv = "DROVER_DEMO_KINESIS_SECRET"

// Issue 9, item 12, with real processes: after a Kinesis reshard the nodes
// discover the new shards at different times, and each places units over
// the set it discovered; a node that sees another member gossip another
// unit set for the source discovers again (actors: announceUnits,
// compareUnits). Three node processes on SQLite read a kinesalite stream
// of two shards with the audit handler (discovery_interval at its 30 s
// default, so the periodic listing cannot be what converges them), under
// a steady trickle of records. Each shard is split in turn; after each
// split, within reshardBound, the cluster tree must list the open shards
// (the untouched one and the children) each exactly once, running, and
// the parent on no node, and stay so (stable membership). At the end
// every record put is in the audit exactly once.
func TestKinesisReshardConvergesWithSQLite(t *testing.T) {
	const reshardBound = 5 * time.Second
	ep := demoKinesis.Endpoint(t)
	kc := awstest.KinesisClient(ep, true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stream := kinesistest.CreateStream(ctx, t, kc, "drover-demo", 2)
	shards, err := kinesisShards(ctx, kc, stream)
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv(reshardSecretEnv, awstest.SecretAccessKey) // the node processes inherit it
	extra := fmt.Sprintf(`  - name: ks
    type: kinesis
    mode: handler
    handler_name: audit
    kinesis:
      stream: %s
      region: %s
      endpoint: %q
      access_key_id: %s
      secret_access_key: "${env:%s}"
    batch_size: 50
    max_wait: 200ms
    lease_ttl: 10s
`, stream, awstest.Region, ep, awstest.AccessKeyID, reshardSecretEnv)
	c := startConverged(t, ctx, Config{Partitions: 3, Extra: extra})
	defer c.Close()
	open := map[string]bool{}
	for _, s := range shards {
		open["ks/"+aws.ToString(s.ShardId)] = true
	}
	if _, err := waitKinesisConverged(ctx, c, open, time.Now(), 30*time.Second, 0); err != nil {
		t.Fatal(dumpLogs(c, fmt.Errorf("before any split: %w", err)))
	}

	put := &kinesisPutter{c: kc, stream: stream, rng: rand.New(rand.NewPCG(5, 9))}
	pctx, stopPutting := context.WithCancel(ctx)
	defer stopPutting()
	perr := make(chan error, 1)
	go func() { perr <- put.run(pctx) }()
	waitFor(t, ctx, "some records put", func() bool { return put.count() > 50 })

	for _, s := range shards {
		parent := aws.ToString(s.ShardId)
		splitAt := time.Now()
		kids, err := kinesisSplit(ctx, kc, stream, s)
		if err != nil {
			t.Fatalf("split %s: %v", parent, err)
		}
		delete(open, "ks/"+parent)
		for _, k := range kids {
			open["ks/"+k] = true
		}
		// the limit is well past the 30 s discovery interval, so that a
		// slow convergence is measured, not only refused
		took, err := waitKinesisConverged(ctx, c, open, splitAt, 45*time.Second, 3*time.Second)
		if err != nil {
			t.Fatal(dumpLogs(c, fmt.Errorf("after splitting %s into %v: %w", parent, kids, err)))
		}
		t.Logf("split %s into %v: every open shard listed once, running, %v after the split", parent, kids, took.Round(time.Millisecond))
		if took > reshardBound {
			t.Errorf("split %s: the cluster converged on the new shards %v after the split, want <= %v", parent, took.Round(time.Millisecond), reshardBound)
		}
		more := put.count() + 50
		waitFor(t, ctx, "more records put after the split", func() bool { return put.count() > more })
	}

	stopPutting()
	if err := <-perr; err != nil {
		t.Fatal(err)
	}
	sent := put.sent()
	var problems []string
	err = func() error {
		deadline := time.Now().Add(60 * time.Second)
		for {
			counts, err := c.auditCounts(ctx, "ks")
			if err != nil {
				return err
			}
			problems = problems[:0]
			lost := 0
			for _, k := range sent {
				switch n := counts[k]; {
				case n == 0:
					lost++
					if lost <= 3 {
						problems = append(problems, "lost: "+k)
					}
				case n > 1:
					problems = append(problems, fmt.Sprintf("duplicated: %s ×%d", k, n))
				}
				delete(counts, k)
			}
			for k := range counts {
				problems = append(problems, "applied but never put: "+k)
			}
			if len(problems) == 0 {
				t.Logf("verified: %d records put, every one in the audit exactly once", len(sent))
				return nil
			}
			if lost == 0 || time.Now().After(deadline) {
				return fmt.Errorf("%d records put, %d lost: %s", len(sent), lost, strings.Join(problems, "; "))
			}
			time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
		}
	}()
	if err != nil {
		t.Error(dumpLogs(c, err))
	}
}

// waitKinesisConverged samples the cluster tree until the source ks lists
// exactly the units of open, each on one node and running there, and
// nothing else, for stable in a row; it returns how long after since that
// stable period began. Samples in which a unit of ks shows on two nodes
// are logged with how long that lasted.
func waitKinesisConverged(ctx context.Context, c *Cluster, open map[string]bool, since time.Time, limit, stable time.Duration) (time.Duration, error) {
	var (
		convergedAt time.Time
		why         string
		twoSince    = map[string]time.Time{}
		twoLongest  time.Duration
		twoUnit     string
	)
	for {
		now := time.Now()
		tree, err := c.Tree(ctx)
		if err != nil {
			why = err.Error()
			convergedAt = time.Time{}
		} else {
			owners, running := tree.Owners(), tree.Running()
			why = ""
			for u := range open {
				if len(owners[u]) != 1 || running[u] == "" {
					why = fmt.Sprintf("%s listed by %v, running on %q", u, owners[u], running[u])
					break
				}
			}
			for u, ns := range owners {
				if !strings.HasPrefix(u, "ks/") {
					continue
				}
				if !open[u] && why == "" {
					why = fmt.Sprintf("%s (not open) still listed by %v", u, ns)
				}
				if len(ns) > 1 {
					if _, ok := twoSince[u]; !ok {
						twoSince[u] = now
					}
					if d := now.Sub(twoSince[u]); d > twoLongest {
						twoLongest, twoUnit = d, fmt.Sprintf("%s on %v", u, ns)
					}
				} else {
					delete(twoSince, u)
				}
			}
			switch {
			case why != "":
				convergedAt = time.Time{}
			case convergedAt.IsZero():
				convergedAt = now
			}
		}
		if !convergedAt.IsZero() && now.Sub(convergedAt) >= stable {
			if twoLongest > 0 {
				fmt.Fprintf(c.log, "ks: longest a unit showed on two nodes: %v (%s)\n", twoLongest.Round(time.Millisecond), twoUnit)
			}
			return convergedAt.Sub(since), nil
		}
		if now.Sub(since) > limit {
			if why == "" {
				why = fmt.Sprintf("converged %v after it, but not yet for %v in a row", convergedAt.Sub(since).Round(time.Millisecond), stable)
			}
			return 0, fmt.Errorf("ks not converged %v after %s: %s (longest on two nodes: %v, %s)",
				limit, since.Format("15:04:05.000"), why, twoLongest.Round(time.Millisecond), twoUnit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kinesisShards lists every shard of the stream, closed ones included.
func kinesisShards(ctx context.Context, kc *awskinesis.Client, stream string) ([]kintypes.Shard, error) {
	var out []kintypes.Shard
	in := &awskinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		r, err := kc.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list shards of %s: %w", stream, err)
		}
		out = append(out, r.Shards...)
		if r.NextToken == nil {
			return out, nil
		}
		in = &awskinesis.ListShardsInput{NextToken: r.NextToken}
	}
}

// kinesisSplit splits shard s in the middle of its hash range and returns
// its children.
func kinesisSplit(ctx context.Context, kc *awskinesis.Client, stream string, s kintypes.Shard) ([]string, error) {
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	mid.Add(mid, big.NewInt(1))
	if _, err := kc.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		return nil, err
	}
	if err := kinesistest.WaitActive(ctx, kc, stream); err != nil {
		return nil, err
	}
	all, err := kinesisShards(ctx, kc, stream)
	if err != nil {
		return nil, err
	}
	var kids []string
	for _, k := range all {
		if aws.ToString(k.ParentShardId) == aws.ToString(s.ShardId) || aws.ToString(k.AdjacentParentShardId) == aws.ToString(s.ShardId) {
			kids = append(kids, aws.ToString(k.ShardId))
		}
	}
	sort.Strings(kids)
	if len(kids) != 2 {
		return nil, fmt.Errorf("split %s: children %v, want 2", aws.ToString(s.ShardId), kids)
	}
	return kids, nil
}

// kinesisPutter puts ten records with random partition keys every 100 ms
// and remembers each as "ks/<shard>@<sequence number>".
type kinesisPutter struct {
	c      *awskinesis.Client
	stream string
	rng    *rand.Rand
	mu     sync.Mutex
	put    []string
}

func (p *kinesisPutter) run(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		entries := make([]kintypes.PutRecordsRequestEntry, 10)
		for j := range entries {
			entries[j] = kintypes.PutRecordsRequestEntry{
				Data:         []byte(fmt.Sprintf(`{"id":%d,"n":%d}`, i*10+j, i)),
				PartitionKey: aws.String(strconv.FormatUint(p.rng.Uint64(), 36)),
			}
		}
		// not cut short by ctx: every record put is remembered
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := p.c.PutRecords(rctx, &awskinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
		cancel()
		if err != nil {
			return fmt.Errorf("put records: %w", err)
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
			return fmt.Errorf("put records: %d of %d failed", n, len(entries))
		}
		p.mu.Lock()
		for _, r := range out.Records {
			p.put = append(p.put, "ks/"+aws.ToString(r.ShardId)+"@"+aws.ToString(r.SequenceNumber))
		}
		p.mu.Unlock()
	}
}

func (p *kinesisPutter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.put)
}

func (p *kinesisPutter) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.put...)
}
