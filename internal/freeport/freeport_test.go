package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct and can be bound once Take returns.
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
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free after Take: %v", p, err)
		}
		l.Close()
	}
}
