package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/actors/placement"
)

// defaultWait bounds SetState's and Leave's wait for their broadcast when
// ctx has no deadline.
const defaultWait = 5 * time.Second

// Membership is this node's membership of a memberlist cluster. It
// implements placement.Membership; its methods are safe for concurrent use.
type Membership struct {
	ml  *memberlist.Memberlist
	log *slog.Logger
	cfg Config

	// self is this node's gossip address, known once memberlist is up;
	// delegates may run before that and then skip what needs it.
	self atomic.Pointer[string]
	// selfAddrs are the addresses this node answers on (see ownAddrs);
	// set before the healer starts, read-only after.
	selfAddrs map[string]bool
	// dup records a duplicate of our name found while joining.
	dup atomic.Pointer[memberlist.Node]

	mu      sync.Mutex
	local   placement.Member      // as gossiped, guarded by mu
	sources []placement.SourceTag // as last set, sorted by ID; guarded by mu
	meta    []byte                // local metadata as gossiped, guarded by mu
	left    bool                  // Leave started, guarded by mu
	updates sync.WaitGroup        // SetState/SetSources broadcasts; Add only under mu while !left

	// view is every other node memberlist counts as alive or suspect, as
	// copied in the event callbacks. memberlist's Members() hands out
	// pointers to nodes it rewrites in place (hashicorp/memberlist#306), so
	// node fields are read only inside the callbacks, which memberlist runs
	// with its node lock held. viewMu is taken under that lock: never call
	// memberlist while holding it.
	viewMu sync.Mutex
	view   map[string]viewEntry // by name, guarded by viewMu
	gone   map[string]gone      // members seen dying, by name; guarded by viewMu

	// The healer (heal.go): healCancel ends it and its attempts, healWG
	// waits for them.
	healCancel context.CancelFunc
	healWG     sync.WaitGroup
	healMu     sync.Mutex
	healing    map[string]*healState // by address, guarded by healMu

	watchMu  sync.Mutex
	watchers map[uint64]*watcher // guarded by watchMu
	nextID   uint64              // guarded by watchMu

	changed  chan struct{} // one slot: "the view changed"
	quit     chan struct{} // closed by Leave to stop the dispatcher
	wg       sync.WaitGroup
	leftDone chan struct{} // closed when Leave has finished
	leaveErr error         // set before leftDone is closed
}

// viewEntry is a node as the last event about it said.
type viewEntry struct {
	addr   string
	member placement.Member
	err    error // its metadata could not be read: not listed in Members
}

type watcher struct {
	f       func()
	stopped atomic.Bool
}

var _ placement.Membership = (*Membership)(nil)

// Join starts memberlist on cfg.Bind and joins the members in cfg.Join
// (none: a new cluster). It returns once this node is a member.
//
// It fails, having stopped everything it started, when cfg is invalid,
// when no member in cfg.Join could be reached, with ErrEncryption when the
// gossip keys differ, and with ErrDuplicateName when a live member at
// another address uses cfg.Name. When ctx ends first, Join returns its
// error once memberlist gives up its connection attempt in flight
// (memberlist's TCP timeout, 10 s, bounds it).
func Join(ctx context.Context, cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gossip config: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	healCtx, healCancel := context.WithCancel(context.Background())
	m := &Membership{
		log:        logger,
		cfg:        cfg,
		local:      placement.Member{Name: cfg.Name, DebugAddr: cfg.DebugAddr, DebugTLS: cfg.DebugTLS, Version: cfg.Version, Capacity: cfg.Capacity, MaxCapacity: cfg.MaxCapacity, State: placement.StateAlive},
		sources:    sortedTags(cfg.Sources),
		view:       map[string]viewEntry{},
		gone:       map[string]gone{},
		healCancel: healCancel,
		healing:    map[string]*healState{},
		watchers:   map[uint64]*watcher{},
		changed:    make(chan struct{}, 1),
		quit:       make(chan struct{}),
		leftDone:   make(chan struct{}),
	}
	m.encodeLocal()
	mc := cfg.memberlistConfig(logger)
	mc.Delegate = (*metaDelegate)(m)
	mc.Events = (*eventDelegate)(m)
	mc.Merge = (*mergeDelegate)(m)
	mc.Conflict = (*conflictDelegate)(m)

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start memberlist on %s: %w", net.JoinHostPort(mc.BindAddr, strconv.Itoa(mc.BindPort)), err)
	}
	m.ml = ml
	self := ml.LocalNode().Address()
	m.self.Store(&self)
	m.selfAddrs = ownAddrs(self, mc)
	m.mu.Lock()
	m.local.Addr = self
	m.mu.Unlock()

	m.wg.Add(1)
	go m.dispatch()

	others, selfListed := m.withoutSelf(ctx, cfg.Join)
	if len(others) > 0 {
		if err := m.joinRetrying(ctx, others); err != nil {
			if !selfListed || errors.Is(err, ErrEncryption) || errors.Is(err, ErrDuplicateName) || ctx.Err() != nil {
				_ = m.stop(0) // the join error says what matters
				return nil, err
			}
			// A seed that lists itself may start the cluster; the
			// healer joins the others when they come up.
			m.log.Warn("no other seed answered: starting a cluster of its own until one can be reached", "name", cfg.Name, "error", err)
		}
	}
	m.healWG.Add(1)
	go m.heal(healCtx)
	m.log.Info("joined the cluster", "name", cfg.Name, "addr", self, "members", ml.NumMembers(), "profile", orDefault(cfg.Profile, ProfileDefault))
	return m, nil
}

// encodeLocal sets the gossiped metadata, and the local member as it
// gossips itself, from the state and sources. Called under mu (or before
// the Membership is shared).
func (m *Membership) encodeLocal() {
	nm := newMeta(m.cfg, m.local.State, m.sources)
	m.meta = nm.encode()
	m.local.Sources, m.local.SourceDigest = nm.sources()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// joinRetrying joins, trying again with a growing pause (100 ms to 2 s)
// while no member answers or the name is still held by a copy of this node
// that the others have not yet declared dead, for up to Config.JoinTimeout:
// nodes started together find each other whatever their order. A wrong
// gossip key fails at once.
func (m *Membership) joinRetrying(ctx context.Context, addrs []string) error {
	limit := m.cfg.JoinTimeout
	if limit == 0 {
		limit = DefaultJoinTimeout
	}
	deadline := time.Now().Add(limit)
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		m.dup.Store(nil)
		err := m.join(ctx, addrs)
		if err == nil || errors.Is(err, ErrEncryption) || ctx.Err() != nil || limit < 0 || time.Now().Add(pause).After(deadline) {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempt, limit)
			}
			return err
		}
		m.log.Info("join failed; trying again", "attempt", attempt, "in", pause, "error", err)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("join %s: %w", strings.Join(addrs, ","), context.Cause(ctx))
		}
		pause = min(pause*2, 2*time.Second)
	}
}

// join runs memberlist's Join and turns its errors into ours.
func (m *Membership) join(ctx context.Context, addrs []string) error {
	done := make(chan error, 1)
	go func() {
		_, err := m.ml.Join(addrs)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Shutting memberlist down makes its Join fail as soon as the
		// connection in flight gives up; wait for it, it is ours.
		_ = m.ml.Shutdown()
		<-done
		return fmt.Errorf("join %s: %w", strings.Join(addrs, ","), context.Cause(ctx))
	}
	if d := m.dup.Load(); d != nil {
		return fmt.Errorf("join %s: %w: %q is in use by the member at %s", strings.Join(addrs, ","), ErrDuplicateName, d.Name, d.Address())
	}
	if err == nil {
		return nil
	}
	if msg := err.Error(); strings.Contains(msg, "encrypt") || strings.Contains(msg, "decrypt") {
		mine := "this node has no secret key"
		if len(m.cfg.SecretKey) > 0 {
			mine = "this node has a secret key"
		}
		return fmt.Errorf("join %s: %w: %s; memberlist said: %v", strings.Join(addrs, ","), ErrEncryption, mine, oneLine(err))
	}
	return fmt.Errorf("join %s: %v", strings.Join(addrs, ","), oneLine(err))
}

// oneLine flattens memberlist's multi-line multierror text.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Local returns this node as it gossips itself.
func (m *Membership) Local() placement.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.local
}

// Members returns the members memberlist does not consider dead or left
// (suspects are still members), this node included, sorted by name. A
// member whose metadata cannot be read (another drover version, not a
// drover node) is left out, and logged when it joins or changes.
func (m *Membership) Members() []placement.Member {
	local := m.Local()
	m.viewMu.Lock()
	out := make([]placement.Member, 0, len(m.view)+1)
	for name, e := range m.view {
		if name != local.Name && e.err == nil {
			out = append(out, e.member)
		}
	}
	m.viewMu.Unlock()
	out = append(out, local)
	slices.SortFunc(out, func(a, b placement.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Watch calls f after every change of the view (a member joins, leaves,
// dies or changes its metadata, this node's SetState), from one goroutine
// the Membership owns, never concurrently with itself. Changes that come
// while callbacks run are coalesced into one more call. f must not block.
// After stop returns f is not called again (a call already started may
// still be running); stop may be called from f. After Leave, Watch does
// nothing.
func (m *Membership) Watch(f func()) (stop func()) {
	w := &watcher{f: f}
	m.mu.Lock()
	left := m.left
	m.mu.Unlock()
	if left {
		return func() {}
	}
	m.watchMu.Lock()
	id := m.nextID
	m.nextID++
	m.watchers[id] = w
	m.watchMu.Unlock()
	return func() {
		w.stopped.Store(true)
		m.watchMu.Lock()
		delete(m.watchers, id)
		m.watchMu.Unlock()
	}
}

// notify records that the view changed. It never blocks: memberlist calls
// it from its own goroutines.
func (m *Membership) notify() {
	select {
	case m.changed <- struct{}{}:
	default: // a change is already pending; the dispatcher will see ours too
	}
}

// dispatch calls the watchers after each change until Leave.
func (m *Membership) dispatch() {
	defer m.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case <-m.changed:
		}
		m.watchMu.Lock()
		ids := slices.Sorted(maps.Keys(m.watchers))
		ws := make([]*watcher, len(ids))
		for i, id := range ids {
			ws[i] = m.watchers[id]
		}
		m.watchMu.Unlock()
		for _, w := range ws {
			if !w.stopped.Load() {
				w.f()
			}
		}
	}
}

// SetState sets this node's state in its gossiped metadata and broadcasts
// it. The local view changes at once; SetState then waits until the
// broadcast went out to a member, ctx ends, or 5 s pass when ctx has no
// deadline. An error from the wait does not undo the change: gossip
// spreads it anyway.
func (m *Membership) SetState(ctx context.Context, s placement.MemberState) error {
	if s != placement.StateAlive && s != placement.StateLeaving {
		return fmt.Errorf("set state %q: not %q or %q", s, placement.StateAlive, placement.StateLeaving)
	}
	what := fmt.Sprintf("set state %s", s)
	if err := m.announce(ctx, what, func() { m.local.State = s }); err != nil {
		return err
	}
	m.log.Info("state announced", "state", s)
	return nil
}

// SetSources sets the sources this node runs in its gossiped metadata
// (sorted by ID; tags is not kept) and broadcasts it, with SetState's
// rules: Local and the watchers see it at once, then SetSources waits for
// the broadcast. A nil tags says nothing (the others take this node to run
// every source); an empty one says it runs none. When the tags do not fit
// in memberlist's 512 bytes of metadata, their digest is gossiped instead:
// Local and the others then see Sources nil and SourceDigest set.
func (m *Membership) SetSources(ctx context.Context, tags []placement.SourceTag) error {
	sorted := sortedTags(tags)
	if err := m.announce(ctx, "set sources", func() { m.sources = sorted }); err != nil {
		return err
	}
	local := m.Local()
	m.log.Debug("sources announced", "sources", len(local.Sources), "digest", local.SourceDigest)
	return nil
}

// announce applies change to the local state under mu, re-encodes the
// metadata, notifies the watchers and broadcasts it, waiting as SetState
// says. what prefixes its errors.
func (m *Membership) announce(ctx context.Context, what string, change func()) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return fmt.Errorf("%s: %w", what, ErrLeft)
	}
	change()
	m.encodeLocal()
	m.updates.Add(1)
	m.mu.Unlock()
	m.notify()

	done := make(chan error, 1)
	wait := waitFor(ctx)
	go func() {
		defer m.updates.Done()
		done <- m.ml.UpdateNode(wait)
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: broadcast: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: broadcast: %w", what, context.Cause(ctx))
	}
}

// waitFor is how long to wait for a broadcast under ctx.
func waitFor(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return defaultWait
	}
	return max(time.Until(d), time.Millisecond)
}

// Leave tells the others this node is leaving, waits until that went out
// (until ctx's deadline, or 5 s without one), stops memberlist and waits
// for every goroutine the Membership started. It shuts down even when the
// broadcast times out, and then reports the timeout. Calling it again
// waits for the first call and returns its result.
func (m *Membership) Leave(ctx context.Context) error {
	m.mu.Lock()
	first := !m.left
	m.left = true
	m.mu.Unlock()
	if !first {
		select {
		case <-m.leftDone:
			return m.leaveErr
		case <-ctx.Done():
			return fmt.Errorf("leave: %w", context.Cause(ctx))
		}
	}
	m.leaveErr = m.stop(waitFor(ctx))
	close(m.leftDone)
	return m.leaveErr
}

// stop ends everything Join started. With wait > 0 it first broadcasts the
// leave and waits up to wait for it to go out; with 0 the others find out
// by probing, as after a crash. It is called once: by Join on failure, by
// Leave, or by a test simulating a crash.
func (m *Membership) stop(wait time.Duration) error {
	graceful := wait > 0
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	// The healer first: no join may start while memberlist leaves.
	m.healCancel()
	m.healWG.Wait()
	// No SetState starts now; let the ones in flight finish while
	// memberlist is still up, so their broadcast can complete.
	m.updates.Wait()
	var errs []error
	if graceful {
		// Say "leaving" first, if not yet said: that is how the others
		// tell a graceful leave from a death (memberlist v0.7.0 does not
		// tell its event delegate), and they do not try to rejoin a node
		// that left.
		deadline := time.Now().Add(wait)
		m.mu.Lock()
		announce := m.local.State != placement.StateLeaving
		if announce {
			m.local.State = placement.StateLeaving
			m.encodeLocal()
		}
		m.mu.Unlock()
		if announce {
			m.notify()
			if err := m.ml.UpdateNode(wait); err != nil {
				errs = append(errs, fmt.Errorf("broadcast leaving: %w", err))
			}
		}
		if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
			errs = append(errs, fmt.Errorf("broadcast: %w", err))
		}
	}
	if err := m.ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("shutdown memberlist: %w", err))
	}
	close(m.quit)
	m.wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("leave: %w", errors.Join(errs...))
	}
	m.log.Info("left the cluster", "graceful", graceful)
	return nil
}
