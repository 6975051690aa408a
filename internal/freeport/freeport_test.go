package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct and can be bound, TCP and UDP, once Take returns.
func TestTake(t *testing.T) {
	ps, err := Take(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct ports", ps)
		}
		seen[p] = true
		addr := "127.0.0.1:" + strconv.Itoa(p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %d is not free for TCP after Take: %v", p, err)
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("port %d is not free for UDP after Take: %v", p, err)
		}
		u.Close()
	}
}

// A port the kernel may hand out by itself (a listener on port 0, the
// local end of a connection: its ephemeral range) can be taken by any
// process between Take and its user's bind; TestThreeNodesWithPostgres
// lost a node to "bind: address already in use" that way. No port may
// come from there.
func TestPortsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	r, err := Reserve(50)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for _, p := range r.Ports() {
		if p < MinPort || (lo <= p && p <= hi) || p > 65535 {
			t.Errorf("port %d: in the ephemeral range %d–%d or below %d", p, lo, hi, MinPort)
		}
	}
}

// A reserved port is not handed out again, to this process or another
// (a lock file per port), until it is released.
func TestReservedPortIsNotHandedOutAgain(t *testing.T) {
	dir := t.TempDir()
	lo, hi, err := pickRange()
	if err != nil {
		t.Fatal(err)
	}
	first, err := reserve(2, lo, hi, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range first.Ports() {
		if again, err := reserve(1, p, p, dir); err == nil {
			again.Release()
			t.Errorf("port %d reserved twice", p)
		}
	}
	first.Release()
	first.Release() // twice is harmless
	for _, p := range first.Ports() {
		again, err := reserve(1, p, p, dir)
		if err != nil {
			t.Errorf("port %d after Release: %v", p, err)
			continue
		}
		again.Release()
	}
}

// A port something listens on is never handed out.
func TestBusyPortSkipped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	if r, err := reserve(1, p, p, t.TempDir()); err == nil {
		r.Release()
		t.Fatalf("port %d handed out while a listener holds it", p)
	}
}
