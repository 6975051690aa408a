// Package freeport finds free loopback TCP ports, for the processes the
// demo, the bench and the throwaway PostgreSQL start.
package freeport

import (
	"errors"
	"fmt"
	"net"
)

// Take returns n distinct loopback ports free at the time of the call: all
// n are held open together, so none is returned twice, then released. A
// port may be taken by someone else before its user binds it.
func Take(n int) ([]int, error) {
	out := make([]int, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, errors.New("find a free port: not a TCP address")
		}
		out[i] = addr.Port
	}
	return out, nil
}
