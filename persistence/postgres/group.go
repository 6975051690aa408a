package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/persistence"
)

var (
	_ persistence.GroupApplier   = (*Store)(nil)
	_ persistence.ParallelGroups = (*Store)(nil)
)

// ApplyGroup implements persistence.GroupApplier. The stream batches of
// the group that Apply writes in one round trip (no dedupe, no handler, a
// table known to exist: applyPipelined) share round trips: a pipeline
// with a Sync after each batch, so each batch is
// an implicit transaction of its own — [fence, upsert, delete, dead
// letters, checkpoint] then Sync. The server runs them one after the
// other; a statement that fails (the fence raising DR001 for a lost
// lease, a record refused) rolls back its own batch only, and the server
// goes on with the next batch after the Sync.
//
// The other batches (queue batches, whose dedupe must answer before
// their writes are known; handler batches, whose handler queries cannot
// be interleaved in a pipeline; batches that create their table) are
// written as Apply writes them, each on a connection of its own, at the
// same time as the pipelines. The pipelined batches are cut into as many
// pipelines as the pool has connections, run at once: one pipeline runs
// its batches one after the other on one server process, so a single one
// would give up the parallelism of the Applies it replaces. Batches of
// different units are independent; a unit's second batch in the group
// waits for its first.
func (s *Store) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]persistence.GroupResult, len(bs))
	// Rounds of distinct units: a unit's batches in order.
	pending := make([]int, len(bs))
	for i := range bs {
		pending[i] = i
	}
	for len(pending) > 0 {
		seen := make(map[string]bool, len(pending))
		var round, later []int
		for _, i := range pending {
			if seen[bs[i].Unit] {
				later = append(later, i)
				continue
			}
			seen[bs[i].Unit] = true
			round = append(round, i)
		}
		s.applyRound(ctx, bs, round, out)
		pending = later
	}
	return out
}

// applyRound writes the batches bs[i] for i in idx (of distinct units)
// into out.
func (s *Store) applyRound(ctx context.Context, bs []*persistence.Batch, idx []int, out []persistence.GroupResult) {
	var piped []*applyPlan
	var pipedAt []int
	var wg sync.WaitGroup
	for _, i := range idx {
		b := bs[i]
		a, rec, tableKnown, err := s.plan(b)
		switch {
		case err != nil:
			out[i].Err = s.applyErr(b, err)
		case a.pipelined(tableKnown) && len(idx) > 1:
			a.rec = rec
			piped = append(piped, a)
			pipedAt = append(pipedAt, i)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				var applied persistence.Applied
				if a.pipelined(tableKnown) {
					applied, err = s.applyPipelined(ctx, a, rec)
				} else {
					applied, err = s.applyTx(ctx, a, rec, tableKnown)
				}
				if err != nil {
					out[i].Err = s.applyErr(b, err)
					return
				}
				out[i].Applied = applied
			}()
		}
	}
	// The pipelined batches in up to pipes pipelines, each on a connection
	// of its own: the server writes them in parallel, as it writes the
	// Applies of units that run at once.
	pipes := min(len(piped), s.pipes())
	for p := range pipes {
		lo, hi := p*len(piped)/pipes, (p+1)*len(piped)/pipes
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs := s.pipeline(ctx, piped[lo:hi])
			for k, i := range pipedAt[lo:hi] {
				if errs[k] != nil {
					out[i].Err = s.applyErr(bs[i], errs[k])
					continue
				}
				out[i].Applied = piped[lo+k].applied
			}
		}()
	}
	wg.Wait()
}

// pipes is how many connections a group's pipelined batches may use at
// once: the pool's size.
func (s *Store) pipes() int {
	return max(1, int(s.pool.Config().MaxConns))
}

// ParallelGroups implements persistence.ParallelGroups: the pool's size.
func (s *Store) ParallelGroups() int { return s.pipes() }

// pipeline writes planned stream batches in one round trip, each batch
// its own implicit transaction, and returns each one's error.
func (s *Store) pipeline(ctx context.Context, plans []*applyPlan) []error {
	errs := make([]error, len(plans))
	fail := func(err error) []error {
		for k := range errs {
			if errs[k] == nil {
				errs[k] = err
			}
		}
		return errs
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fail(wrapf(err, "connect"))
	}
	defer conn.Release()
	queued := make([]*pgx.Batch, len(plans))
	descs := make(map[string]*pgconn.StatementDescription)
	for k, a := range plans {
		q := &pgx.Batch{}
		q.Queue(s.sql.fence, a.b.Unit, a.b.Lease.Token)
		a.queueWrites(q, s, a.rec)
		queued[k] = q
		for _, qq := range q.QueuedQueries {
			if descs[qq.SQL] != nil {
				continue
			}
			// prepared once per connection (pgx keeps it), as Apply's
			// statements are in pgx's statement cache
			sd, err := conn.Conn().Prepare(ctx, qq.SQL, qq.SQL)
			if err != nil {
				return fail(wrapf(err, "prepare"))
			}
			descs[qq.SQL] = sd
		}
	}
	typeMap := conn.Conn().TypeMap()
	encoded := make([][]encodedQuery, len(plans))
	var eqb pgx.ExtendedQueryBuilder
	for k, q := range queued {
		// Every statement of a batch encoded before any is sent: a batch
		// whose arguments do not encode is not sent at all.
		for _, qq := range q.QueuedQueries {
			eq, err := encodeQuery(&eqb, typeMap, descs[qq.SQL], qq.Arguments)
			if err != nil {
				errs[k], encoded[k] = fmt.Errorf("encode: %w", err), nil
				break
			}
			encoded[k] = append(encoded[k], eq)
		}
	}
	tr := tracePipeline(ctx, conn.Conn(), queued, errs)
	var traceErr error
	defer func() { tr.end(traceErr) }()
	p := conn.Conn().PgConn().StartPipeline(ctx)
	for k := range plans {
		if errs[k] != nil {
			continue
		}
		for _, eq := range encoded[k] {
			p.SendQueryPrepared(eq.name, eq.values, eq.formats, eq.results)
		}
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		_ = p.Close()
		traceErr = err
		return fail(wrapf(err, "send"))
	}
	for k, a := range plans {
		if errs[k] != nil {
			continue // not sent
		}
		seg := &segment{p: p, stmts: queued[k].QueuedQueries, tr: tr}
		err := a.readFence(seg)
		if err == nil {
			err = a.readWrites(seg)
		}
		errs[k] = err
		if err := seg.sync(); err != nil {
			if errs[k] == nil {
				errs[k] = wrapf(err, "commit")
			}
			if seg.broken {
				// The connection is gone: the outcome of every later batch
				// is unknown.
				_ = p.Close()
				traceErr = err
				return fail(dbErr(err))
			}
		}
	}
	if err := p.Close(); err != nil {
		conn.Conn().PgConn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // a broken connection is dropped
	}
	return errs
}

// encodedQuery is one statement of a pipeline, its arguments encoded.
type encodedQuery struct {
	name             string // of the prepared statement
	values           [][]byte
	formats, results []int16
}

// segment reads the results of one batch of a pipeline, up to its Sync,
// as a resultExecer, so readFence and readWrites serve both
// write paths. After a statement failed the server skips the rest of the
// batch up to its Sync, and so does segment.
type segment struct {
	p      *pgconn.Pipeline
	err    error // of the statement that failed
	broken bool  // the connection failed: nothing more can be read
	stmts  []*pgx.QueuedQuery
	n      int // statements read
	tr     *pipeTrace
}

func (g *segment) Exec() (pgconn.CommandTag, error) {
	if g.err != nil {
		return pgconn.CommandTag{}, g.err
	}
	var stmt *pgx.QueuedQuery
	if g.n < len(g.stmts) {
		stmt = g.stmts[g.n]
	}
	g.n++
	tag, err := g.exec()
	g.tr.query(stmt, tag, err)
	return tag, err
}

func (g *segment) exec() (pgconn.CommandTag, error) {
	r, err := g.p.GetResults()
	if err == nil {
		rr, ok := r.(*pgconn.ResultReader)
		if !ok {
			err = fmt.Errorf("pipeline: expected a result, got %T", r)
			g.broken = true
		} else {
			var tag pgconn.CommandTag
			if tag, err = rr.Close(); err == nil {
				return tag, nil
			}
		}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		g.broken = true
	}
	g.err = err
	return pgconn.CommandTag{}, err
}

// sync reads the batch's Sync: its commit. An error the server gives
// there (the commit failed) is returned; the Sync itself follows it.
func (g *segment) sync() error {
	if g.broken {
		return g.err
	}
	var commitErr error
	for range 2 {
		r, err := g.p.GetResults()
		if err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				g.broken = true
				return err
			}
			commitErr = err
			continue
		}
		if _, ok := r.(*pgconn.PipelineSync); !ok {
			g.broken = true
			return fmt.Errorf("pipeline: expected the end of a batch, got %T", r)
		}
		return commitErr
	}
	g.broken = true
	return commitErr
}
