package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Clock judges lease expiry and stamps every time the store writes.
	// nil means clock.Real{}.
	Clock clock.Clock
}

// Store is an in-memory persistence.Store. Create it with New.
type Store struct {
	clock clock.Clock

	mu          sync.Mutex // guards everything below
	closed      bool
	leases      map[string]persistence.Lease      // unit -> lease, RenewedAt its own renewal
	heartbeats  map[string]time.Time              // owner -> its last RenewLeases
	checkpoints map[string]persistence.Checkpoint // unit -> checkpoint
	tables      map[string]map[string]persistence.Record
	deadLetters []persistence.DeadLetter // deadLetters[i].ID == i+1
	dlByPos     map[dlKey]int64          // (source, unit, position) -> id
	dedupe      map[dedupeKey]time.Time  // -> applied at
	quality     []persistence.QualityWindow
	sources     map[string][]string // source -> initial units
	controls    map[controlKey]persistence.Control
	audit       []persistence.AuditEntry // audit[i].ID == i+1
	faults      faults
}

type dlKey struct{ source, unit, position string }

type dedupeKey struct{ source, messageID string }

var (
	_ persistence.Store        = (*Store)(nil)
	_ persistence.GroupApplier = (*Store)(nil)
)

// New returns an empty store.
func New(cfg Config) *Store {
	c := cfg.Clock
	if c == nil {
		c = clock.Real{}
	}
	return &Store{
		clock:       c,
		leases:      make(map[string]persistence.Lease),
		heartbeats:  make(map[string]time.Time),
		checkpoints: make(map[string]persistence.Checkpoint),
		tables:      make(map[string]map[string]persistence.Record),
		dlByPos:     make(map[dlKey]int64),
		dedupe:      make(map[dedupeKey]time.Time),
		sources:     make(map[string][]string),
	}
}

// now is the store clock's time in UTC without a monotonic reading, the way
// a database would return it.
func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// enter is the first step of every call, made with s.mu held: it refuses a
// cancelled context, a closed store and injected faults.
func (s *Store) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed {
		return errors.New("store closed")
	}
	return s.faults.inject(op)
}

// Close makes every later call fail. It never fails itself.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Acquire implements persistence.Leases.
func (s *Store) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpAcquire); err != nil {
		return persistence.Lease{}, fmt.Errorf("acquire %s: %w", req.Unit, err)
	}
	if err := checkAcquire(req); err != nil {
		return persistence.Lease{}, fmt.Errorf("acquire %s: %w", req.Unit, err)
	}
	now := s.now()
	cur, ok := s.leases[req.Unit]
	if seen := s.seen(cur); ok && !takeable(seen, req, now) {
		return persistence.Lease{}, &persistence.LeaseHeldError{Holder: seen}
	}
	l := persistence.Lease{
		Unit:       req.Unit,
		Owner:      req.Owner,
		Token:      cur.Token + 1,
		ExpiresAt:  now.Add(req.TTL),
		AcquiredAt: now,
		RenewedAt:  now,
	}
	s.leases[req.Unit] = l
	if ok {
		l.PrevOwner, l.PrevToken = cur.Owner, cur.Token
	}
	return l, nil
}

func checkAcquire(req persistence.AcquireRequest) error {
	switch {
	case req.Unit == "":
		return errors.New("empty unit")
	case req.Owner == "":
		return errors.New("empty owner")
	case req.TTL <= 0:
		return fmt.Errorf("ttl %s: must be positive", req.TTL)
	case req.Stale < 0:
		return fmt.Errorf("stale %s: must not be negative", req.Stale)
	}
	return nil
}

// seen is l as the store reports it: RenewedAt is the later of the lease's
// own renewal and its owner's heartbeat. The caller holds s.mu.
func (s *Store) seen(l persistence.Lease) persistence.Lease {
	if hb, ok := s.heartbeats[l.Owner]; ok && l.Owner != "" && hb.After(l.RenewedAt) {
		l.RenewedAt = hb
	}
	return l
}

// takeable reports whether Acquire may take the lease cur (as seen) for req
// at now: when it is released, expired (ExpiresAt <= now), already
// req.Owner's, or held by an owner that is not in req.Live (an empty Live
// counts every owner absent: callers pass their whole membership view) and
// that has not renewed nor sent a heartbeat for req.Stale.
func takeable(cur persistence.Lease, req persistence.AcquireRequest, now time.Time) bool {
	return cur.Owner == "" ||
		!cur.ExpiresAt.After(now) ||
		cur.Owner == req.Owner ||
		(!slices.Contains(req.Live, cur.Owner) && now.Sub(cur.RenewedAt) >= req.Stale)
}

// held returns the unit's lease when l's owner still holds it with l's
// token, or ErrLeaseLost. The caller holds s.mu.
func (s *Store) held(l persistence.Lease) (persistence.Lease, error) {
	cur, ok := s.leases[l.Unit]
	if !ok || cur.Owner == "" || cur.Owner != l.Owner || cur.Token != l.Token {
		return persistence.Lease{}, fmt.Errorf("token %d of %s: %w", l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	return cur, nil
}

// Renew implements persistence.Leases. A lease past its expiry that nobody
// took over is still held by its token and can be renewed.
func (s *Store) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpRenew); err != nil {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: %w", l.Unit, err)
	}
	if ttl <= 0 {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: ttl %s: must be positive", l.Unit, ttl)
	}
	cur, err := s.held(l)
	if err != nil {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: %w", l.Unit, err)
	}
	now := s.now()
	cur.ExpiresAt, cur.RenewedAt = now.Add(ttl), now
	s.leases[l.Unit] = cur
	return cur, nil
}

// RenewLeases implements persistence.Leases: it records owner's
// heartbeat, and extends the leases of ls it holds whose expiry is less
// than ttl/2 away.
func (s *Store) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	return persistence.RenewLeasesOf(ctx, s, owner, ls, ttl)
}

// RenewLeasesChanges implements persistence.ChangesRenewer.
func (s *Store) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpRenew); err != nil {
		return persistence.RenewAnswer{}, fmt.Errorf("renew %d leases: %w", len(ls), err)
	}
	if err := persistence.CheckRenewLeases(owner, len(ls), ttl); err != nil {
		return persistence.RenewAnswer{}, err
	}
	now := s.now()
	s.heartbeats[owner] = now
	a := persistence.RenewAnswer{Beat: now}
	for _, l := range ls {
		l.Owner = owner
		cur, err := s.held(l)
		if err != nil {
			a.Lost = append(a.Lost, l.Unit)
			continue
		}
		if persistence.RenewDue(cur.ExpiresAt, now, ttl) {
			cur.ExpiresAt, cur.RenewedAt = now.Add(ttl), now
			s.leases[l.Unit] = cur
		}
		if !cur.ExpiresAt.Equal(l.ExpiresAt) || !cur.AcquiredAt.Equal(l.AcquiredAt) {
			cur.RenewedAt = now // the heartbeat just written
			a.Changed = append(a.Changed, cur)
		}
	}
	return a, nil
}

// InitSource implements persistence.Sources.
func (s *Store) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return nil, fmt.Errorf("init source %s: %w", source, err)
	}
	if source == "" {
		return nil, errors.New("init source: empty source")
	}
	cur, ok := s.sources[source]
	if !ok {
		cur = slices.Compact(slices.Sorted(slices.Values(units)))
		if cur == nil {
			cur = []string{}
		}
		s.sources[source] = cur
	}
	return slices.Clone(cur), nil
}

// Release implements persistence.Leases: the owner becomes empty, the token
// stays and the lease expires now.
func (s *Store) Release(ctx context.Context, l persistence.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpRelease); err != nil {
		return fmt.Errorf("release lease %s: %w", l.Unit, err)
	}
	cur, err := s.held(l)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.Unit, err)
	}
	cur.Owner = ""
	cur.ExpiresAt = s.now()
	s.leases[l.Unit] = cur
	return nil
}

// List implements persistence.Leases.
func (s *Store) List(ctx context.Context) ([]persistence.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpList); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out := make([]persistence.Lease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, s.seen(l))
	}
	slices.SortFunc(out, func(a, b persistence.Lease) int { return strings.Compare(a.Unit, b.Unit) })
	return out, nil
}
