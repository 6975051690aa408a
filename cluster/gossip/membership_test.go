package gossip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/actors/placement"
)

// These tests run real memberlist nodes on 127.0.0.1 with dynamic ports,
// one after the other (failure detection is timing-sensitive on a small
// machine). They wait on conditions with deadlines, never on sleeps.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startThree starts a of cfg, then b and c joining it, and waits until
// each sees all three.
func startThree(t *testing.T, cfg Config) (a, b, c *Membership) {
	t.Helper()
	a = start(t, cfg)
	b = start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	c = start(t, Config{Name: "c", Join: []string{a.Local().Addr}})
	for _, m := range []*Membership{a, b, c} {
		waitUntil(t, 2*time.Second, m.cfg.Name+" sees a, b, c", sees(m, "a", "b", "c"))
	}
	return a, b, c
}

// start joins a node with the fast profile on a free loopback port and
// leaves it when the test ends.
func start(t *testing.T, cfg Config) *Membership {
	t.Helper()
	m, err := Join(t.Context(), withDefaults(t, cfg))
	if err != nil {
		t.Fatalf("join %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Leave(ctx); err != nil {
			t.Errorf("leave %s: %v", cfg.Name, err)
		}
	})
	return m
}

func withDefaults(t *testing.T, cfg Config) Config {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1:0"
	}
	if cfg.Profile == "" {
		cfg.Profile = ProfileFast
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(newTestHandler(t, slog.LevelWarn))
	}
	return cfg
}

// crash stops a node without telling anyone, as kill -9 would.
func crash(t *testing.T, m *Membership) {
	t.Helper()
	m.mu.Lock()
	m.left = true
	m.mu.Unlock()
	if err := m.stop(0); err != nil {
		t.Fatalf("crash %s: %v", m.cfg.Name, err)
	}
	close(m.leftDone)
}

// waitUntil polls cond until it holds or d passes, and returns how long it
// took.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		<-tick.C
	}
	return time.Since(begin)
}

func names(ms []placement.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func find(ms []placement.Member, name string) (placement.Member, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return placement.Member{}, false
}

func sees(m *Membership, want ...string) func() bool {
	return func() bool { return slices.Equal(names(m.Members()), want) }
}

// testHandler sends records at or above level to t.Log until the test's
// cleanups have run. memberlist's Shutdown does not wait for its own
// goroutines, so one may still log just after Leave returned: that line is
// dropped rather than logged into a finished test.
type testHandler struct {
	t     *testing.T
	level slog.Level
	attrs []slog.Attr
	done  *testDone
}

type testDone struct {
	mu   sync.Mutex
	over bool
}

func newTestHandler(t *testing.T, level slog.Level) testHandler {
	d := &testDone{}
	// Registered before the nodes' Leave cleanups, so it runs after them.
	t.Cleanup(func() {
		d.mu.Lock()
		d.over = true
		d.mu.Unlock()
	})
	return testHandler{t: t, level: level, done: d}
}

func (h testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h testHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := slices.Clone(h.attrs)
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	h.done.mu.Lock()
	defer h.done.mu.Unlock()
	if !h.done.over {
		h.t.Logf("%s %s %v", r.Level, r.Message, attrs)
	}
	return nil
}
func (h testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clone(h.attrs), as...)
	return h
}
func (h testHandler) WithGroup(string) slog.Handler { return h }

func TestThreeNodesConvergeWithMetadata(t *testing.T) {
	a := start(t, Config{Name: "a", DebugAddr: "127.0.0.1:7070", DebugTLS: true, Version: "v1.2.3", Capacity: 2, MaxCapacity: 8})
	b := start(t, Config{Name: "b", DebugAddr: "127.0.0.1:7071", Version: "v1.2.4", Join: []string{a.Local().Addr}})
	c := start(t, Config{Name: "c", Capacity: 0.5, MaxCapacity: 16, Join: []string{b.Local().Addr}})

	for _, m := range []*Membership{a, b, c} {
		took := waitUntil(t, 2*time.Second, m.cfg.Name+" sees a, b, c", sees(m, "a", "b", "c"))
		t.Logf("%s converged in %v", m.cfg.Name, took)
	}
	want := map[string]placement.Member{
		"a": {Name: "a", Addr: a.Local().Addr, DebugAddr: "127.0.0.1:7070", DebugTLS: true, Version: "v1.2.3", Capacity: 2, MaxCapacity: 8, State: placement.StateAlive},
		"b": {Name: "b", Addr: b.Local().Addr, DebugAddr: "127.0.0.1:7071", Version: "v1.2.4", State: placement.StateAlive},
		"c": {Name: "c", Addr: c.Local().Addr, Capacity: 0.5, MaxCapacity: 16, State: placement.StateAlive},
	}
	for _, m := range []*Membership{a, b, c} {
		for _, got := range m.Members() {
			if !reflect.DeepEqual(got, want[got.Name]) {
				t.Errorf("%s sees %+v, want %+v", m.cfg.Name, got, want[got.Name])
			}
		}
	}
	if !strings.HasPrefix(a.Local().Addr, "127.0.0.1:") || strings.HasSuffix(a.Local().Addr, ":0") {
		t.Errorf("Local().Addr = %q, want the bound loopback address", a.Local().Addr)
	}
}

// joinedTwo starts a, then b joining it, and waits until a sees b. The
// test may crash b: its Leave at the end ignores the error.
func joinedTwo(t *testing.T) (a, b *Membership) {
	t.Helper()
	a = start(t, Config{Name: "a"})
	b, err := Join(t.Context(), withDefaults(t, Config{Name: "b", Join: []string{a.Local().Addr}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Leave(context.Background()) })
	waitUntil(t, 2*time.Second, "a sees b", sees(a, "a", "b"))
	return a, b
}

// joinedThree starts a, then b and c joining it, and waits until a and b
// see all three. The test may crash c or make it leave: its Leave at the
// end ignores the error.
func joinedThree(t *testing.T) (a, b, c *Membership) {
	t.Helper()
	a = start(t, Config{Name: "a"})
	b = start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	c, err := Join(t.Context(), withDefaults(t, Config{Name: "c", Join: []string{a.Local().Addr}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(context.Background()) })
	for _, m := range []*Membership{a, b} {
		waitUntil(t, 2*time.Second, m.cfg.Name+" sees a, b, c", sees(m, "a", "b", "c"))
	}
	return a, b, c
}

func TestCrashedNodeDroppedWithinTwoSeconds(t *testing.T) {
	a, b, c := joinedThree(t)
	crash(t, c)
	took := waitUntil(t, 2*time.Second, "a and b drop c after it crashed", func() bool {
		return sees(a, "a", "b")() && sees(b, "a", "b")()
	})
	t.Logf("crashed node dropped by both survivors in %v (fast profile)", took)
}

func TestGracefulLeaveSeenQuickly(t *testing.T) {
	a, b, c := joinedThree(t)
	begin := time.Now()
	if err := c.Leave(t.Context()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	// Probing alone takes about 1 s on the fast profile (the crash test):
	// well under that means the leave message did it.
	waitUntil(t, 400*time.Millisecond, "a and b drop c after it left", func() bool {
		return sees(a, "a", "b")() && sees(b, "a", "b")()
	})
	t.Logf("graceful leave seen by both in %v (Leave call included)", time.Since(begin))
	// Leave again: same result, nothing to do.
	if err := c.Leave(t.Context()); err != nil {
		t.Errorf("second leave: %v", err)
	}
	if err := c.SetState(t.Context(), placement.StateLeaving); !errors.Is(err, ErrLeft) {
		t.Errorf("SetState after Leave = %v, want ErrLeft", err)
	}
}

func TestSetStateLeavingSeenByOthers(t *testing.T) {
	a, b, c := startThree(t, Config{Name: "a"})
	state := func(m *Membership, name string) placement.MemberState {
		mem, _ := find(m.Members(), name)
		return mem.State
	}

	if err := b.SetState(t.Context(), placement.StateLeaving); err != nil {
		t.Fatalf("SetState(leaving): %v", err)
	}
	if got := b.Local().State; got != placement.StateLeaving {
		t.Errorf("b.Local().State = %q after SetState(leaving)", got)
	}
	took := waitUntil(t, time.Second, "a and c see b leaving", func() bool {
		return state(a, "b") == placement.StateLeaving && state(c, "b") == placement.StateLeaving
	})
	t.Logf("leaving state seen by both in %v", took)
	// Leaving members are still members.
	if got := names(a.Members()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("a sees %v, want b still listed while leaving", got)
	}

	if err := b.SetState(t.Context(), placement.StateAlive); err != nil {
		t.Fatalf("SetState(alive): %v", err)
	}
	waitUntil(t, time.Second, "a and c see b alive again", func() bool {
		return state(a, "b") == placement.StateAlive && state(c, "b") == placement.StateAlive
	})

	if err := b.SetState(t.Context(), "sleeping"); err == nil {
		t.Errorf("SetState(sleeping) succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.SetState(ctx, placement.StateLeaving); !errors.Is(err, context.Canceled) {
		t.Errorf("SetState with a cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestWatch(t *testing.T) {
	a := start(t, Config{Name: "a"})
	// Two watchers: one stopped part-way; the other shows when a round of
	// callbacks has happened, since every round calls every watcher.
	var mu sync.Mutex
	var stoppedCalls, liveCalls int
	liveSaw := make(chan []string, 100)
	stop := a.Watch(func() {
		mu.Lock()
		stoppedCalls++
		mu.Unlock()
	})
	stopLive := a.Watch(func() {
		mu.Lock()
		liveCalls++
		mu.Unlock()
		select {
		case liveSaw <- names(a.Members()):
		default:
		}
	})
	defer stopLive()

	waitFor := func(what string, want ...string) {
		t.Helper()
		deadline := time.After(2 * time.Second)
		for {
			select {
			case got := <-liveSaw:
				if slices.Equal(got, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no Watch call that saw %v (%s)", want, what)
			}
		}
	}

	b := start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	waitFor("b joined", "a", "b")
	mu.Lock()
	if stoppedCalls == 0 {
		t.Errorf("the first watcher was not called on a join")
	}
	mu.Unlock()

	stop()
	mu.Lock()
	before := stoppedCalls
	mu.Unlock()
	if err := b.SetState(t.Context(), placement.StateLeaving); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * time.Second)
	for {
		got := <-liveSaw
		if m, _ := find(a.Members(), "b"); m.State == placement.StateLeaving && slices.Equal(got, []string{"a", "b"}) {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("a's watcher never saw b leaving")
		default:
		}
	}
	if err := b.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor("b left", "a")
	mu.Lock()
	defer mu.Unlock()
	if stoppedCalls != before {
		t.Errorf("a stopped watcher was called %d more times", stoppedCalls-before)
	}
	if liveCalls < 3 {
		t.Errorf("live watcher called %d times for a join, an update and a leave", liveCalls)
	}
}

func TestWatchCallbackMayStopItself(t *testing.T) {
	a := start(t, Config{Name: "a"})
	called := make(chan struct{}, 10)
	var stop func()
	var once sync.Once
	ready := make(chan struct{})
	stop = a.Watch(func() {
		<-ready
		once.Do(stop)
		called <- struct{}{}
	})
	close(ready)
	start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	select {
	case <-called:
	case <-time.After(2 * time.Second):
		t.Fatal("watcher not called on a join")
	}
}

func TestEncryption(t *testing.T) {
	key := bytes.Repeat([]byte{7}, SecretKeySize)
	other := bytes.Repeat([]byte{8}, SecretKeySize)
	a := start(t, Config{Name: "a", SecretKey: key})
	b := start(t, Config{Name: "b", SecretKey: key, Join: []string{a.Local().Addr}})
	waitUntil(t, 2*time.Second, "a and b see each other", func() bool { return sees(a, "a", "b")() && sees(b, "a", "b")() })

	plain := start(t, Config{Name: "plain"})
	for _, c := range []struct {
		name string
		cfg  Config
		says string
	}{
		{"no key into an encrypted cluster", Config{Name: "c", Join: []string{a.Local().Addr}}, "this node has no secret key"},
		{"another key", Config{Name: "d", SecretKey: other, Join: []string{a.Local().Addr}}, "this node has a secret key"},
		{"a key into a plain cluster", Config{Name: "e", SecretKey: key, Join: []string{plain.Local().Addr}}, "this node has a secret key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Join(t.Context(), withDefaults(t, c.cfg))
			if err == nil {
				_ = m.Leave(t.Context())
				t.Fatalf("joined")
			}
			if !errors.Is(err, ErrEncryption) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "secret key") {
				t.Errorf("error %q: want ErrEncryption saying %q", err, c.says)
			}
			t.Logf("refused: %v", err)
		})
	}
	if got := names(a.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after the refused joins a sees %v", got)
	}
}

func TestDuplicateNameRefused(t *testing.T) {
	a := start(t, Config{Name: "a"})
	b := start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	waitUntil(t, 2*time.Second, "a and b see each other", func() bool { return sees(a, "a", "b")() && sees(b, "a", "b")() })

	for _, via := range []*Membership{a, b} {
		m, err := Join(t.Context(), withDefaults(t, Config{Name: "a", Join: []string{via.Local().Addr}, JoinTimeout: 300 * time.Millisecond}))
		if err == nil {
			_ = m.Leave(t.Context())
			t.Fatalf("a second a joined through %s", via.cfg.Name)
		}
		if !errors.Is(err, ErrDuplicateName) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), a.Local().Addr) {
			t.Errorf("joining through %s: error %q, want ErrDuplicateName naming \"a\" and its address %s", via.cfg.Name, err, a.Local().Addr)
		}
		t.Logf("refused: %v", err)
	}
	for _, m := range []*Membership{a, b} {
		got, _ := find(m.Members(), "a")
		if got.Addr != a.Local().Addr {
			t.Errorf("%s sees a at %s, want the first a at %s", m.cfg.Name, got.Addr, a.Local().Addr)
		}
	}
}

func TestNameReusableAfterDeath(t *testing.T) {
	a, b := joinedTwo(t)
	oldAddr := b.Local().Addr
	crash(t, b)
	waitUntil(t, 2*time.Second, "a drops the crashed b", sees(a, "a"))

	// b restarts on another port: its name is free again.
	b2 := start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	waitUntil(t, 2*time.Second, "a sees the new b", func() bool {
		m, ok := find(a.Members(), "b")
		return ok && m.Addr == b2.Local().Addr
	})
	if b2.Local().Addr == oldAddr {
		t.Fatalf("the restarted b got the same address %s; the test shows nothing", oldAddr)
	}
}

func TestJoinFailures(t *testing.T) {
	// Nobody listens on port 1.
	_, err := Join(t.Context(), withDefaults(t, Config{Name: "x", Join: []string{"127.0.0.1:1"}, JoinTimeout: 300 * time.Millisecond}))
	if err == nil || errors.Is(err, ErrEncryption) || errors.Is(err, ErrDuplicateName) || !strings.Contains(err.Error(), "127.0.0.1:1") ||
		!strings.Contains(err.Error(), "gave up after") {
		t.Errorf("join of an unreachable address: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Join(ctx, withDefaults(t, Config{Name: "x"})); !errors.Is(err, context.Canceled) {
		t.Errorf("join with a cancelled ctx: %v", err)
	}
	if _, err := Join(t.Context(), Config{}); err == nil || !strings.Contains(err.Error(), "name: required") {
		t.Errorf("join with an empty config: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Name: "n"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "name: required"},
		{Config{Name: "n", Bind: "localhost:7946"}, "bind: host \"localhost\" is not an IP address"},
		{Config{Name: "n", Bind: "127.0.0.1"}, "bind: "},
		{Config{Name: "n", Bind: "127.0.0.1:70000"}, "bind: port"},
		{Config{Name: "n", Advertise: "10.0.0.1"}, "advertise: "},
		{Config{Name: "n", Join: []string{"127.0.0.1:1", "nohost"}}, "join[1]: "},
		{Config{Name: "n", Profile: "slow"}, "profile: \"slow\""},
		{Config{Name: "n", SecretKey: []byte("short")}, "secret_key: 5 bytes, want 32"},
		{Config{Name: "n", Capacity: math.NaN()}, "capacity: NaN"},
		{Config{Name: "n", MaxCapacity: math.NaN()}, "max_capacity: NaN"},
		{Config{Name: "n", MaxCapacity: math.Inf(1)}, "max_capacity: +Inf"},
		{Config{Name: "n", MaxCapacity: -1}, "max_capacity: -1"},
		{Config{Name: strings.Repeat("n", 600)}, "metadata"},
		// Issue 10, item 1: plain gossip only on loopback.
		{Config{Name: "n", Bind: "0.0.0.0:7946"}, "secret_key: required when bind or advertise is not a loopback address (bind 0.0.0.0:7946)"},
		{Config{Name: "n", Bind: "10.0.0.5:7946"}, "(bind 10.0.0.5:7946)"},
		{Config{Name: "n", Bind: "[::]:7946"}, "(bind [::]:7946)"},
		{Config{Name: "n", Advertise: "10.0.0.5:7946"}, "(advertise 10.0.0.5:7946)"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	for _, c := range []Config{
		{Name: "n", Bind: "0.0.0.0:7946"},
		{Name: "n", Bind: "127.0.0.1:7946", Advertise: "10.0.0.5:0"},
	} {
		if err := c.Validate(); !errors.Is(err, ErrSecretKeyRequired) {
			t.Errorf("Validate(%+v) = %v, want ErrSecretKeyRequired", c, err)
		}
		c.SecretKey = bytes.Repeat([]byte{1}, SecretKeySize)
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) with a key: %v", c, err)
		}
	}
	for _, c := range []Config{{Name: "n"}, {Name: "n", Bind: "127.0.0.2:0"}, {Name: "n", Bind: "[::1]:0", Advertise: "127.0.0.1:7946"}} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) on loopback without a key: %v", c, err)
		}
	}
	// Every field's error at once.
	err := Config{Profile: "slow", SecretKey: []byte{1}}.Validate()
	for _, want := range []string{"name:", "profile:", "secret_key:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate with three bad fields = %v, missing %q", err, want)
		}
	}
}

func TestProfiles(t *testing.T) {
	fast := Config{Name: "n", Profile: ProfileFast}.memberlistConfig(slog.New(slog.DiscardHandler))
	if fast.ProbeInterval != 200*time.Millisecond || fast.ProbeTimeout != 100*time.Millisecond ||
		fast.SuspicionMult != 2 || fast.GossipInterval != 50*time.Millisecond || fast.PushPullInterval != 2*time.Second {
		t.Errorf("fast profile: probe %v/%v, suspicion %d, gossip %v, push/pull %v",
			fast.ProbeInterval, fast.ProbeTimeout, fast.SuspicionMult, fast.GossipInterval, fast.PushPullInterval)
	}
	def := Config{Name: "n"}.memberlistConfig(slog.New(slog.DiscardHandler))
	if def.ProbeInterval != time.Second || def.ProbeTimeout != 500*time.Millisecond || def.SuspicionMult != 4 {
		t.Errorf("default profile is not memberlist's LAN config: probe %v/%v, suspicion %d", def.ProbeInterval, def.ProbeTimeout, def.SuspicionMult)
	}
	if def.BindAddr != "127.0.0.1" || def.BindPort != 7946 {
		t.Errorf("default bind %s:%d", def.BindAddr, def.BindPort)
	}
	adv := Config{Name: "n", Bind: "0.0.0.0:7000", Advertise: "10.1.2.3:0"}.memberlistConfig(slog.New(slog.DiscardHandler))
	if adv.AdvertiseAddr != "10.1.2.3" || adv.AdvertisePort != 7000 {
		t.Errorf("advertise %s:%d, want 10.1.2.3:7000", adv.AdvertiseAddr, adv.AdvertisePort)
	}
}

// recorder keeps the records it is given.
type recorder struct {
	mu      *sync.Mutex
	records *[]recorded
	attrs   []slog.Attr
}

type recorded struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newRecorder() recorder { return recorder{mu: &sync.Mutex{}, records: new([]recorded)} }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	for _, a := range r.attrs {
		attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.records = append(*r.records, recorded{rec.Level, rec.Message, attrs})
	return nil
}
func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	r.attrs = append(slices.Clone(r.attrs), as...)
	return r
}
func (r recorder) WithGroup(string) slog.Handler { return r }
func (r recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(*r.records)
}

func TestMemberlistLogsGoToSlog(t *testing.T) {
	rec := newRecorder()
	a := start(t, Config{Name: "a", Logger: slog.New(rec)})
	start(t, Config{Name: "b", Logger: slog.New(rec), Join: []string{a.Local().Addr}})
	waitUntil(t, 2*time.Second, "a sees b", sees(a, "a", "b"))

	var fromMemberlist, ours int
	for _, r := range rec.all() {
		switch r.attrs["component"] {
		case "memberlist":
			fromMemberlist++
			if strings.HasPrefix(r.msg, "[") || strings.HasPrefix(r.msg, "memberlist:") {
				t.Errorf("memberlist line not parsed: %q", r.msg)
			}
			if r.level != slog.LevelDebug && r.level != slog.LevelInfo && r.level != slog.LevelWarn && r.level != slog.LevelError {
				t.Errorf("odd level %v for %q", r.level, r.msg)
			}
		case "":
			if r.msg == "joined the cluster" || r.msg == "member joined" {
				ours++
			}
		}
	}
	if fromMemberlist == 0 || ours == 0 {
		t.Fatalf("%d memberlist records and %d of ours; want both", fromMemberlist, ours)
	}
	// memberlist logs a debug line for each stream connection it accepts.
	found := slices.ContainsFunc(rec.all(), func(r recorded) bool {
		return r.attrs["component"] == "memberlist" && r.level == slog.LevelDebug && strings.HasPrefix(r.msg, "Stream connection")
	})
	if !found {
		t.Errorf("no DEBUG \"Stream connection\" record from memberlist")
	}
}

func TestParseLogLine(t *testing.T) {
	for _, c := range []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Suspect b has failed", slog.LevelInfo, "Suspect b has failed"},
		{"[WARN] memberlist: Was able to connect to b", slog.LevelWarn, "Was able to connect to b"},
		{"[ERR] memberlist: Failed to send ping", slog.LevelError, "Failed to send ping"},
		{"[ERROR] something", slog.LevelError, "something"},
		{"[ERR] Failed to shutdown transport: x", slog.LevelError, "Failed to shutdown transport: x"},
		{"Err: Could not set the deadline: x", slog.LevelError, "Could not set the deadline: x"},
		{"plain words", slog.LevelInfo, "plain words"},
		{"[weird] tag", slog.LevelInfo, "[weird] tag"},
	} {
		level, msg := parseLogLine(c.line)
		if level != c.level || msg != c.msg {
			t.Errorf("parseLogLine(%q) = %v %q, want %v %q", c.line, level, msg, c.level, c.msg)
		}
	}

	// Several lines in one write become several records.
	rec := newRecorder()
	w := logWriter{log: slog.New(rec)}
	if n, err := fmt.Fprint(w, "[DEBUG] memberlist: one\n[WARN] memberlist: two\n"); err != nil || n == 0 {
		t.Fatalf("write: %d %v", n, err)
	}
	got := rec.all()
	if len(got) != 2 || got[0].msg != "one" || got[1].level != slog.LevelWarn {
		t.Errorf("records %+v", got)
	}
}

func TestLeaveStopsAllGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, err := Join(t.Context(), withDefaults(t, Config{Name: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Join(t.Context(), withDefaults(t, Config{Name: "b", Join: []string{a.Local().Addr}}))
	if err != nil {
		t.Fatal(err)
	}
	stop := b.Watch(func() {})
	defer stop()
	waitUntil(t, 2*time.Second, "a sees b", sees(a, "a", "b"))
	if err := b.SetState(t.Context(), placement.StateLeaving); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Membership{b, a} {
		if err := m.Leave(t.Context()); err != nil {
			t.Errorf("leave %s: %v", m.cfg.Name, err)
		}
	}
	// After Leave, Watch is a no-op.
	a.Watch(func() { t.Error("watcher called after Leave") })()
}

func TestRestartAtSameAddressRejoinsAtOnce(t *testing.T) {
	a, b := joinedTwo(t)
	addr := b.Local().Addr
	crash(t, b)
	// Restart before a noticed: same name, same address, so it is the same
	// member coming back, not a duplicate.
	b2 := start(t, Config{Name: "b", Bind: addr, Capacity: 3, Join: []string{a.Local().Addr}})
	took := waitUntil(t, time.Second, "a sees the restarted b with its new metadata", func() bool {
		m, ok := find(a.Members(), "b")
		return ok && m.Capacity == 3 && m.State == placement.StateAlive
	})
	t.Logf("restarted b seen in %v", took)
	if b2.Local().Addr != addr {
		t.Fatalf("restarted b at %s, want %s", b2.Local().Addr, addr)
	}
}

func TestNodeWithoutDroverMetadataIsLeftOut(t *testing.T) {
	rec := newRecorder()
	a := start(t, Config{Name: "a", Logger: slog.New(rec)})

	mc := memberlist.DefaultLANConfig()
	mc.Name = "stranger"
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.Logger = log.New(io.Discard, "", 0)
	raw, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Shutdown() }()
	if _, err := raw.Join([]string{a.Local().Addr}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "a warns about the stranger", func() bool {
		return slices.ContainsFunc(rec.all(), func(r recorded) bool {
			return r.level == slog.LevelWarn && r.attrs["member"] == "stranger" && strings.Contains(r.msg, "metadata")
		})
	})
	if got := names(a.Members()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a lists %v, want the stranger left out", got)
	}
}

// Nodes started together: one joins an address whose node is not up yet,
// and keeps trying until it is.
func TestJoinWaitsForAPeerStartingLater(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // free, and nobody listens yet
	type result struct {
		m   *Membership
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := Join(t.Context(), withDefaults(t, Config{Name: "early", Join: []string{addr}, JoinTimeout: 20 * time.Second}))
		done <- result{m, err}
	}()
	late := start(t, Config{Name: "late", Bind: addr})
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("early did not join late once it was up: %v", r.err)
		}
		t.Cleanup(func() { _ = r.m.Leave(context.Background()) })
		waitUntil(t, 2*time.Second, "both see each other", func() bool { return sees(late, "early", "late")() && sees(r.m, "early", "late")() })
	case <-time.After(20 * time.Second):
		t.Fatal("join did not return within 20 s")
	}
}
