package awstest

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

var (
	sqsSrv     = SQS()
	kinesisSrv = Kinesis()
)

func TestMain(m *testing.M) {
	if os.Getenv("AWSTEST_CHILD") != "" {
		// Re-executed by TestWithoutNode: run only the child test.
		os.Exit(m.Run())
	}
	os.Exit(Main(m, sqsSrv, kinesisSrv))
}

// TestEmulatorsAnswer: each emulator's endpoint is an http URL whose
// server answers a listing.
func TestEmulatorsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  *Server
		list func(ctx context.Context, ep string) error
	}{
		{"SQS", sqsSrv, func(ctx context.Context, ep string) error {
			_, err := SQSClient(ep, false).ListQueues(ctx, &sqs.ListQueuesInput{})
			return err
		}},
		{"Kinesis", kinesisSrv, func(ctx context.Context, ep string) error {
			_, err := KinesisClient(ep, false).ListStreams(ctx, &kinesis.ListStreamsInput{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := tc.srv.Endpoint(t)
			if !strings.HasPrefix(ep, "http://") {
				t.Fatalf("endpoint %q", ep)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tc.list(ctx, ep); err != nil {
				t.Fatalf("list: %v", err)
			}
		})
	}
}

// TestKinesisSurvivesAbortedRequest: a client that closes its connection
// in the middle of a request body (as the adapter tests' cancelled calls
// and cut connections do) leaves kinesalite running and answering.
func TestKinesisSurvivesAbortedRequest(t *testing.T) {
	ep := kinesisSrv.Endpoint(t)
	if os.Getenv(EnvKinesisEndpoint) != "" {
		t.Skip(EnvKinesisEndpoint + " is set: the server is not the launcher's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := KinesisClient(ep, false)
	for i := range 3 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ep, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.1\r\n"+
			"X-Amz-Target: Kinesis_20131202.ListStreams\r\nContent-Length: 100\r\n\r\n{\"Lim")
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The call after the abort is answered, and the process is alive.
		if _, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
			t.Fatalf("ListStreams after aborted request %d: %v", i, err)
		}
	}
	kinesisSrv.mu.Lock()
	exited := kinesisSrv.exited
	kinesisSrv.mu.Unlock()
	select {
	case <-exited:
		t.Fatalf("kinesalite exited after aborted requests: %v", kinesisSrv.waitErr)
	default:
	}
}

// TestChildNoNode runs only when TestWithoutNode re-executes the binary:
// it asks for an endpoint with no node in PATH.
func TestChildNoNode(t *testing.T) {
	if os.Getenv("AWSTEST_CHILD") == "" {
		t.Skip("helper of TestWithoutNode")
	}
	SQS().Endpoint(t)
	t.Fatal("Endpoint returned without node")
}

// TestWithoutNode re-executes the test binary with an empty PATH: the
// endpoint request skips the test, and fails it under CI=true.
func TestWithoutNode(t *testing.T) {
	if os.Getenv(EnvSQSEndpoint) != "" {
		t.Skip(EnvSQSEndpoint + " is set: the emulator is not started, node is not needed")
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildNoNode$", "-test.v")
		cmd.Env = []string{"AWSTEST_CHILD=1", "PATH=" + t.TempDir(), "CI=" + ci, "HOME=" + os.Getenv("HOME")}
		out, err := cmd.CombinedOutput()
		switch ci {
		case "true":
			if err == nil || !strings.Contains(string(out), "CI=true and no SQS (fauxqs) emulator: node is not installed") {
				t.Errorf("CI=true: err %v, want a failure naming the missing node; output:\n%s", err, out)
			}
		default:
			if err != nil || !strings.Contains(string(out), "--- SKIP: TestChildNoNode") || !strings.Contains(string(out), "node is not installed") {
				t.Errorf("no CI: err %v, want a skip naming the missing node; output:\n%s", err, out)
			}
		}
	}
}

func TestTailBufferReady(t *testing.T) {
	b := newTailBuffer(16)
	for _, s := range []string{"warming up\nRE", "ADY 4", "321\nmore output that is long\n"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	port, err := b.waitPort(ctx, nil)
	if err != nil || port != 4321 {
		t.Fatalf("port %d, %v; want 4321", port, err)
	}
	if got := b.String(); len(got) != 16 || !strings.HasSuffix(got, "is long\n") {
		t.Fatalf("tail %q: want the last 16 bytes", got)
	}
	exited := make(chan struct{})
	close(exited)
	if _, err := newTailBuffer(16).waitPort(ctx, exited); err == nil {
		t.Fatal("waitPort after the process exited: want an error")
	}
}
