package debug

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/drover-dev/drover/actors"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe):
// inside a synctest bubble their deadlines run on the bubble's clock.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slowController takes d (on the bubble's clock) to carry out a control,
// as a reload that hands units over does, and notes whether the
// request's context was still alive at its end.
type slowController struct {
	d           time.Duration
	ctxErrAtEnd error
}

func (c *slowController) Control(ctx context.Context, req ControlRequest) (ControlReply, error) {
	time.Sleep(c.d)
	c.ctxErrAtEnd = ctx.Err()
	return ControlReply{Action: req.Action, Node: "n1", Detail: "reloaded: added orders"}, nil
}

// A control that takes longer than the server's WriteTimeout (and its
// ReadTimeout) still gets its answer to the client, and its context is not
// cancelled under it: the control route extends its deadlines to
// ControlTimeout. The slow step runs on synctest's clock: no real wait.
func TestControlOutlastingTheWriteTimeoutIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &slowController{d: 90 * time.Second}
		s, err := New(Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}, Controller: slow, SampleEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		if s.cfg.WriteTimeout >= slow.d || s.cfg.ReadTimeout >= slow.d || s.cfg.ControlTimeout <= slow.d {
			t.Fatalf("the test needs WriteTimeout %v and ReadTimeout %v under %v, ControlTimeout %v over it",
				s.cfg.WriteTimeout, s.cfg.ReadTimeout, slow.d, s.cfg.ControlTimeout)
		}
		ln := newPipeListener()
		s.listen = func(string, string) (net.Listener, error) { return ln, nil }
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{DialContext: ln.dial, DisableKeepAlives: true}
		client := &http.Client{Transport: tr}
		defer func() { // also after a t.Fatal: the bubble must end empty
			tr.CloseIdleConnections()
			if err := s.Shutdown(context.Background()); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Error(err)
			}
		}()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:7070/debug/control/reload", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("a control that took %v lost its answer: %v", slow.d, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "reloaded: added orders") {
			t.Fatalf("answer %d %q, %v", resp.StatusCode, b, err)
		}
		if took := time.Since(start); took < slow.d {
			t.Fatalf("answered after %v: the slow step did not run", took)
		}
		if slow.ctxErrAtEnd != nil {
			t.Errorf("the control's context ended under it: %v", slow.ctxErrAtEnd)
		}
	})
}
