package tcpproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/goleak"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a test server. A test
// points the adapter under test at the proxy and then cuts its connections,
// or stops it (the port refuses connections, as a server that is down
// does) and starts it again on the same port, while the server behind it
// keeps its data. Safe for concurrent use.
type Proxy struct {
	target string // host:port of the server
	addr   string // host:port the proxy listens on

	mu      sync.Mutex
	ln      net.Listener // nil while stopped
	conns   map[net.Conn]struct{}
	closed  bool
	running sync.WaitGroup // accept loop and connection pipes
}

// New starts a proxy to the server at target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes every connection through the proxy, once, and returns how
// many it closed (both ends of each proxied connection count); new
// connections are accepted as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.Close()
	}
	return n
}

// Stop closes the listener and every connection: connecting fails with
// "connection refused" until Start.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Start listens again on the same port after Stop. It retries for a while
// in case the port is briefly unavailable.
func (p *Proxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("tcpproxy: proxy closed")
	}
	if p.ln != nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serveLocked(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tcpproxy: listen again on %s: %w", p.addr, err)
		}
		// The port was ours a moment ago; wait for the kernel to free it.
		t := time.NewTimer(50 * time.Millisecond)
		<-t.C
	}
}

// Close stops the proxy for good and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Stop()
	p.running.Wait()
	return nil
}

// IgnoreGoroutines matches the goroutines of every Proxy, for goleak.
func IgnoreGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/drover-dev/drover/internal/tcpproxy.(*Proxy).accept"),
		goleak.IgnoreAnyFunction("github.com/drover-dev/drover/internal/tcpproxy.(*Proxy).pipe"),
	}
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.running.Add(1)
	go p.accept(ln)
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.running.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Stop
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // stopped meanwhile
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.conns[up] = struct{}{}
		p.running.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies from src to dst; when either side ends it closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.running.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
