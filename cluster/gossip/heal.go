package gossip

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Healing. memberlist never contacts a member again once it declared it
// dead, and a node started with an empty join list (or one whose seeds were
// all down) is a cluster of its own until someone joins it. So every node
// runs a healer: on a timer (healInterval, with jitter) it tries to join
//
//   - each address of Config.Join that is not a live member's (a host name
//     counts as live when every address it resolves to is a live member's
//     or this node's), and
//   - the address of each member it saw die within the last
//     reconnectWindow, while no live member has that name or address.
//
// A member that left gracefully is not rejoined (unless its address is in
// Config.Join): it meant to go, and a new process that reuses its address
// either lists seeds itself or is listed by the others. "Left" means it
// said "leaving" before it went (Leave says so when SetState has not); a
// member that crashed while leaving counts as left too.
//
// memberlist exchanges state with whoever answers at an address, as for
// the join list: a process that is not a memberlist node fails the
// attempt; a node of another cluster that reuses a dead member's address
// within the window is refused when the clusters have different gossip
// keys (a refused merge, like one refused for a duplicate name, changes
// nothing) and merged when they share a key or have none. Give each
// cluster its own key where addresses are reused (Kubernetes pod IPs).
//
// Each attempt first opens a TCP connection with a short timeout
// (healDialTimeout), cancelled by Leave, so that an address where nothing
// answers never holds memberlist's Join (whose connection timeout is 10 s)
// and never holds Leave. Attempts run concurrently, at most one per address.
// Every attempt is logged at Debug; a join that succeeds (two parts of the
// cluster merged) at Info. An address that answers but still does not show
// up as a live member (a join address that is a NAT or load-balancer
// front, say), or that refuses the merge, is tried again only after
// healBackoff.
const (
	// reconnectWindow is how long a member that died is tried again. A
	// partition longer than that heals through the join addresses.
	reconnectWindow = 5 * time.Minute
	// healDialTimeout bounds the reachability check of one attempt.
	healDialTimeout = time.Second
	// healBackoff is the pause after an attempt that joined without the
	// address becoming a live member's, or that was refused.
	healBackoff = 30 * time.Second
	// resolveTimeout bounds the DNS lookup of a join address.
	resolveTimeout = 2 * time.Second
)

// healInterval is the pause before the next healing round: 1–1.5 s with
// the fast profile, 2–3 s with the default one.
func (c Config) healInterval() time.Duration {
	base := 2 * time.Second
	if c.Profile == ProfileFast {
		base = time.Second
	}
	return base + rand.N(base/2)
}

// gone is a member this node saw die.
type gone struct {
	addr string
	at   time.Time
}

// healState is the healer's memory of one address.
type healState struct {
	busy      bool      // an attempt is in flight
	answered  bool      // the last attempt joined
	notBefore time.Time // no attempt before
}

// heal runs healing rounds until ctx ends (Leave).
func (m *Membership) heal(ctx context.Context) {
	defer m.healWG.Done()
	for {
		t := time.NewTimer(m.cfg.healInterval())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		m.healRound(ctx, time.Now())
	}
}

// healRound starts an attempt for every address worth trying.
func (m *Membership) healRound(ctx context.Context, now time.Time) {
	var targets []healTarget
	for _, j := range m.cfg.Join {
		targets = append(targets, healTarget{addr: j, why: "join address", join: true})
	}
	alive := m.aliveAddrs()
	m.viewMu.Lock()
	for name, g := range m.gone {
		_, back := m.view[name]
		switch {
		case back || now.Sub(g.at) > reconnectWindow:
			delete(m.gone, name)
		case !alive[g.addr]:
			targets = append(targets, healTarget{addr: g.addr, why: fmt.Sprintf("member %s died %s ago", name, now.Sub(g.at).Round(100*time.Millisecond))})
		}
	}
	m.viewMu.Unlock()

	m.healMu.Lock()
	defer m.healMu.Unlock()
	wanted := map[string]bool{}
	for _, t := range targets {
		if wanted[t.addr] {
			continue
		}
		wanted[t.addr] = true
		st := m.healing[t.addr]
		if st == nil {
			st = &healState{}
			m.healing[t.addr] = st
		}
		if st.busy || now.Before(st.notBefore) || ctx.Err() != nil {
			continue
		}
		st.busy = true
		m.healWG.Add(1) // heal's own count is held: Leave's Wait is not done
		go m.attempt(ctx, t, alive)
	}
	for addr, st := range m.healing {
		if !wanted[addr] && !st.busy {
			delete(m.healing, addr)
		}
	}
}

// healTarget is an address the healer tries, and why.
type healTarget struct {
	addr, why string
	join      bool // from Config.Join: may be a host name, may be this node
}

// attempt tries to join t.addr once.
func (m *Membership) attempt(ctx context.Context, t healTarget, alive map[string]bool) {
	defer m.healWG.Done()
	addr, why := t.addr, t.why
	joined, refused := false, false
	defer func() {
		m.healMu.Lock()
		defer m.healMu.Unlock()
		st := m.healing[addr]
		st.busy = false
		if joined && st.answered || refused {
			st.notBefore = time.Now().Add(healBackoff)
		}
		st.answered = joined
	}()

	if t.join {
		// Skip a join address that stands for live members (or this
		// node) only.
		addrs, err := resolve(ctx, addr)
		if err == nil && allIn(addrs, alive) {
			return
		}
	}
	m.log.Debug("trying to rejoin", "addr", addr, "why", why)
	d := net.Dialer{Timeout: healDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		m.log.Debug("rejoin: not reachable", "addr", addr, "error", err)
		return
	}
	_ = conn.Close()
	if ctx.Err() != nil {
		return
	}
	if _, err := m.ml.Join([]string{addr}); err != nil {
		msg := oneLine(err)
		if strings.Contains(msg, "encrypt") || strings.Contains(msg, "decrypt") || strings.Contains(msg, ErrDuplicateName.Error()) {
			refused = true
			m.log.Warn("rejoin refused; trying again later", "addr", addr, "why", why, "in", healBackoff, "error", msg)
			return
		}
		m.log.Debug("rejoin failed", "addr", addr, "why", why, "error", msg)
		return
	}
	joined = true
	m.healMu.Lock()
	again := m.healing[addr].answered
	m.healMu.Unlock()
	if again {
		m.log.Debug("rejoin: the address answered again but is not a live member's; trying it less often", "addr", addr, "in", healBackoff)
		return
	}
	m.log.Info("rejoined: merged with the members at an address that was not a live member's", "addr", addr, "why", why, "members", m.ml.NumMembers())
}

// aliveAddrs is the set of addresses of live members (in memberlist's
// sense: drover's metadata or not) and of this node.
func (m *Membership) aliveAddrs() map[string]bool {
	out := map[string]bool{}
	for a := range m.selfAddrs {
		out[a] = true
	}
	m.viewMu.Lock()
	for _, e := range m.view {
		out[e.addr] = true
	}
	m.viewMu.Unlock()
	return out
}

func allIn(addrs []string, set map[string]bool) bool {
	for _, a := range addrs {
		if !set[a] {
			return false
		}
	}
	return len(addrs) > 0
}

// resolve returns the ip:port addresses a host:port address stands for:
// itself when the host is an IP address, else what DNS says (within
// resolveTimeout).
func resolve(ctx context.Context, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{net.JoinHostPort(ip.String(), port)}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip.IP.String(), port)
	}
	return out, nil
}

// ownAddrs is every ip:port this node answers gossip on: its advertised
// address, its bind address, and when it binds every interface, each
// interface's address and loopback's at its port.
func ownAddrs(self string, mc *memberlist.Config) map[string]bool {
	out := map[string]bool{self: true}
	port := strconv.Itoa(mc.BindPort)
	bind := net.ParseIP(mc.BindAddr)
	if bind == nil {
		return out
	}
	if !bind.IsUnspecified() {
		out[net.JoinHostPort(bind.String(), port)] = true
		return out
	}
	out[net.JoinHostPort("127.0.0.1", port)] = true
	out[net.JoinHostPort("::1", port)] = true
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out[net.JoinHostPort(ipn.IP.String(), port)] = true
		}
	}
	return out
}

// withoutSelf splits the join list into the addresses of others and
// whether it named this node (an address all of whose resolutions are this
// node's: every node may list every seed, itself included).
func (m *Membership) withoutSelf(ctx context.Context, join []string) (others []string, self bool) {
	for _, j := range join {
		addrs, err := resolve(ctx, j)
		if err == nil && allIn(addrs, m.selfAddrs) {
			self = true
			continue
		}
		others = append(others, j)
	}
	return others, self
}
