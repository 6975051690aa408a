package pubsub

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards TCP connections to a server. It can drop every connection
// it carries (a connection loss) and stop listening and start again on the
// same port (a server that goes away and comes back, seen from the client).
// It owns an accept goroutine while listening and two copy goroutines per
// connection; stop and close end them all and wait.
type proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
}

// cut closes every connection the proxy carries; new ones are accepted.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
	}
	return n
}

// stop closes the listener and every connection and waits for the
// goroutines: connections are refused until start.
func (p *proxy) stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.cut()
	p.wg.Wait()
}

// start listens again on the same address, retrying while the port is not
// free yet.
func (p *proxy) start() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("proxy: listen again"), err)
		}
		<-time.After(20 * time.Millisecond)
	}
}
