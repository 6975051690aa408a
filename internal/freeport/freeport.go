// Package freeport finds free loopback ports, for the processes the demo,
// the bench and the throwaway PostgreSQL start.
//
// A port is chosen now and bound later, by another process. Ports that
// the kernel hands out by itself (a listener on port 0, the local end of
// an outgoing connection) come from its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768–60999 by default), so a
// port picked from there can be taken by any process on the machine
// before its user binds it: a busy CI machine running test packages in
// parallel does exactly that (a demo node then exits at start with
// "bind: address already in use"). freeport therefore picks from outside
// that range, at or above MinPort, where only a process that names the
// port can bind it, and checks that TCP and UDP (memberlist binds both)
// are free there. Reserve also holds each port against every other
// freeport user, in this process or another, until Release: a lock file
// per port (flock) in the temporary directory.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// MinPort is the lowest port freeport hands out: above the fixed ports of
// `drover demo` (14222, 17071+, 17946+, 18085, 19092).
const MinPort = 20000

// attempts bounds how many candidates one port may cost.
const attempts = 500

// Reservation is a set of ports held for their user until Release.
type Reservation struct {
	ports []int
	locks []*os.File
}

// Ports are the reserved ports, distinct.
func (r *Reservation) Ports() []int { return append([]int(nil), r.ports...) }

// Release lets other freeport users have the ports again. It is safe to
// call more than once.
func (r *Reservation) Release() {
	for _, f := range r.locks {
		if f != nil {
			_ = f.Close() // closing the file drops its lock
		}
	}
	r.locks = nil
}

// Reserve returns n distinct loopback ports outside the kernel's
// ephemeral range, free for TCP and UDP at the time of the call and held
// against other freeport users until Release.
func Reserve(n int) (*Reservation, error) {
	lo, hi, err := pickRange()
	if err != nil {
		return nil, err
	}
	return reserve(n, lo, hi, lockDir())
}

// Take returns n distinct loopback ports as Reserve does, but releases
// them at once: for a user that binds them right away.
func Take(n int) ([]int, error) {
	r, err := Reserve(n)
	if err != nil {
		return nil, err
	}
	r.Release()
	return r.ports, nil
}

// reserve picks n ports in [lo, hi] with lock files in dir.
func reserve(n, lo, hi int, dir string) (*Reservation, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky) // as the temporary directory: every user's processes lock here
	r := &Reservation{}
	span := hi - lo + 1
	start := rand.IntN(span)
	tried := 0
	for i := 0; len(r.ports) < n; i++ {
		if i == span || tried == attempts*n {
			r.Release()
			return nil, fmt.Errorf("find a free port: %d of %d found in %d–%d (%d tried)", len(r.ports), n, lo, hi, tried)
		}
		tried++
		p := lo + (start+i)%span
		lock, ok := lockPort(dir, p)
		if !ok {
			continue // another freeport user holds it
		}
		if !bindable(p) {
			if lock != nil {
				_ = lock.Close()
			}
			continue
		}
		r.ports = append(r.ports, p)
		r.locks = append(r.locks, lock)
	}
	return r, nil
}

// bindable reports whether 127.0.0.1:p can be bound for TCP and for UDP.
func bindable(p int) bool {
	addr := "127.0.0.1:" + strconv.Itoa(p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = u.Close()
	return true
}

// lockDir holds the lock files, one per port ever reserved (empty files,
// kept: removing one while another process opens it would let two hold
// "the" lock).
func lockDir() string { return os.TempDir() + string(os.PathSeparator) + "drover-freeport" }

// pickRange is the range freeport picks from: MinPort up to the start of
// the ephemeral range, or from its end up when that is the larger part.
func pickRange() (lo, hi int, err error) {
	elo, ehi := ephemeralRange()
	below := elo - MinPort // ports MinPort .. elo-1
	above := 65535 - max(ehi, MinPort-1)
	switch {
	case below >= above && below > 0:
		return MinPort, elo - 1, nil
	case above > 0:
		return max(ehi+1, MinPort), 65535, nil
	}
	return 0, 0, errors.New("find a free port: the ephemeral port range covers every port from " + strconv.Itoa(MinPort))
}

// ephemeralRange is the kernel's range for automatic ports: Linux's
// setting, else 32768–65535 (Linux's default start, and it covers the
// IANA range 49152–65535 other systems use).
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h {
				return l, h
			}
		}
	}
	return 32768, 65535
}
