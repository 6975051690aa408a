package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// Environment of a child process of TestTwoProcessesShareOneFile.
const (
	childNameEnv  = "DROVER_SQLITE_TEST_CHILD"
	childPathEnv  = "DROVER_SQLITE_TEST_PATH"
	childOtherEnv = "DROVER_SQLITE_TEST_OTHER"
)

// childReport is what a child prints as its last line.
type childReport struct {
	Applied map[string]int     // successful applies per unit
	Tokens  map[string][]int64 // tokens this child acquired, per unit
	Lost    int                // applies or releases refused with ErrLeaseLost
	Held    int                // acquires refused with ErrLeaseHeld
	Errors  []string           // anything else: must stay empty
}

var mpUnits = []string{"mp/0", "mp/1", "mp/2"}

const mpRounds = 150

// TestTwoProcessesShareOneFile runs two OS processes (this test binary
// again) that contend for the same leases and apply to the same units of
// one file, both migrating it at start. Each apply is a read-modify-write of
// a per-unit counter whose value is also the checkpoint. It checks that no
// update is lost, that tokens are unique and strictly increasing per unit,
// and that no error other than the fencing ones surfaces (no SQLITE_BUSY).
func TestTwoProcessesShareOneFile(t *testing.T) {
	if name := os.Getenv(childNameEnv); name != "" {
		runChild(t, name)
		return
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	names := []string{"proc-a", "proc-b"}
	var children []*child
	for i, name := range names {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTwoProcessesShareOneFile$", "-test.count=1")
		cmd.Env = append(os.Environ(), childNameEnv+"="+name, childPathEnv+"="+path, childOtherEnv+"="+names[1-i])
		children = append(children, startChild(t, name, cmd, 16<<20))
	}
	// Both children have opened (and migrated) the file before either
	// starts: the barrier is a line on stdin.
	for _, c := range children {
		if !waitLine(c.lines, "ready") {
			_ = c.cmd.Wait()
			t.Fatalf("%s did not get ready: %s", c.name, c.stderr.String())
		}
	}
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.stdin.Close()
	}
	reports := make(map[string]childReport)
	for _, c := range children {
		var rep childReport
		found := false
		for c.lines.Scan() {
			if line, ok := strings.CutPrefix(c.lines.Text(), "REPORT "); ok {
				if err := json.Unmarshal([]byte(line), &rep); err != nil {
					t.Fatalf("%s: bad report %q: %v", c.name, line, err)
				}
				found = true
			}
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, c.stderr.String())
		}
		if !found {
			t.Fatalf("%s sent no report\n%s", c.name, c.stderr.String())
		}
		reports[c.name] = rep
	}

	s := open(t, path, nil)
	leases := map[string]persistence.Lease{}
	ls, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		leases[l.Unit] = l
	}
	contention := 0
	for name, rep := range reports {
		for _, e := range rep.Errors {
			t.Errorf("%s: unexpected error: %s", name, e)
		}
		contention += rep.Lost + rep.Held
		t.Logf("%s: applied %v, lost %d, held %d", name, rep.Applied, rep.Lost, rep.Held)
	}
	if contention == 0 {
		t.Error("the processes never contended: the test proved nothing")
	}
	for _, u := range mpUnits {
		var all []int64
		applied := 0
		for name, rep := range reports {
			if !slices.IsSorted(rep.Tokens[u]) {
				t.Errorf("%s: tokens of %s not increasing: %v", name, u, rep.Tokens[u])
			}
			all = append(all, rep.Tokens[u]...)
			applied += rep.Applied[u]
		}
		slices.Sort(all)
		if len(slices.Compact(slices.Clone(all))) != len(all) {
			t.Errorf("%s: a token was handed out twice: %v", u, all)
		}
		// Every acquire incremented the token by one, from zero.
		if got := leases[u].Token; got != int64(len(all)) {
			t.Errorf("%s: final token %d, want %d acquisitions", u, got, len(all))
		}
		rs, err := s.Records(ctx, "counters", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := -1
		for _, r := range rs {
			if r.Key == u {
				var v struct{ N int }
				if err := json.Unmarshal(r.Doc, &v); err != nil {
					t.Fatal(err)
				}
				n = v.N
			}
		}
		if n != applied {
			t.Errorf("%s: counter %d, want %d successful applies: an update was lost", u, n, applied)
		}
		c, err := s.Checkpoint(ctx, u)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", u, err)
		}
		if c.Position != strconv.Itoa(applied) {
			t.Errorf("%s: checkpoint %s, want %d", u, c.Position, applied)
		}
	}
}

// child is this test binary run again as a child process: its stdin, the
// lines of its stdout and its stderr.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr strings.Builder
}

// startChild starts cmd as a child of the given name. maxLine, where not
// 0, is the longest line of stdout read (bufio's default otherwise).
func startChild(t *testing.T, name string, cmd *exec.Cmd, maxLine int) *child {
	t.Helper()
	c := &child{name: name, cmd: cmd}
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.lines = bufio.NewScanner(out)
	if maxLine > 0 {
		c.lines.Buffer(make([]byte, 0, 64<<10), maxLine)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func waitLine(sc *bufio.Scanner, want string) bool {
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

// runChild is the body of one child process.
func runChild(t *testing.T, name string) {
	ctx := context.Background()
	other := os.Getenv(childOtherEnv)
	s, err := sqlite.Open(ctx, os.Getenv(childPathEnv), sqlite.Config{})
	if err != nil {
		t.Fatalf("%s: open: %v", name, err)
	}
	defer s.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("%s: barrier: %v", name, err)
	}
	rep := childReport{Applied: map[string]int{}, Tokens: map[string][]int64{}}
	fail := func(err error) { rep.Errors = append(rep.Errors, err.Error()) }
	// At least mpRounds rounds, and on until this process has met the other
	// (a refused acquire or apply), within a bound.
	for i := 0; i < mpRounds || (rep.Lost+rep.Held == 0 && i < 20*mpRounds); i++ {
		u := mpUnits[i%len(mpUnits)]
		live := []string{name, other}
		if i%2 == 1 {
			live = []string{name} // the other process looks dead: take over
		}
		l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: u, Owner: name, TTL: time.Minute, Live: live})
		if errors.Is(err, persistence.ErrLeaseHeld) {
			rep.Held++
			continue
		}
		if err != nil {
			fail(err)
			continue
		}
		rep.Tokens[u] = append(rep.Tokens[u], l.Token)
		for range 2 {
			ok, err := applyIncrement(ctx, s, l)
			switch {
			case errors.Is(err, persistence.ErrLeaseLost):
				rep.Lost++
			case err != nil:
				fail(err)
			case ok:
				rep.Applied[u]++
			}
		}
		if i%3 == 0 {
			if _, err := s.Renew(ctx, l, time.Minute); errors.Is(err, persistence.ErrLeaseLost) {
				rep.Lost++
			} else if err != nil {
				fail(err)
			}
		}
		if i%5 == 0 {
			if err := s.Release(ctx, l); errors.Is(err, persistence.ErrLeaseLost) {
				rep.Lost++
			} else if err != nil {
				fail(err)
			}
		}
	}
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("REPORT " + string(out))
}

// applyIncrement reads the unit's counter outside the transaction and
// applies counter+1 with it as the checkpoint. If the batch commits, the
// lease was never taken over since it was acquired, so nobody else can have
// applied in between: the handler checks that it reads what was read
// outside.
func applyIncrement(ctx context.Context, s *sqlite.Store, l persistence.Lease) (bool, error) {
	rs, err := s.Records(ctx, "counters", "", 0)
	if err != nil {
		return false, err
	}
	before := 0
	for _, r := range rs {
		if r.Key == l.Unit {
			var v struct{ N int }
			if err := json.Unmarshal(r.Doc, &v); err != nil {
				return false, err
			}
			before = v.N
		}
	}
	next := strconv.Itoa(before + 1)
	b := &persistence.Batch{
		Source: "mp", Unit: l.Unit, Lease: l, Table: "counters",
		Ops: []persistence.Op{
			{Kind: persistence.OpUpsert, Key: "last-" + l.Unit, Doc: []byte(`{"by":"` + l.Owner + `"}`), Position: next},
			{Kind: persistence.OpMessage, Position: next},
		},
		Checkpoint: next,
		Handle: func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
			doc, ok, err := tx.Get(ctx, "counters", l.Unit)
			if err != nil {
				return err
			}
			n := 0
			if ok {
				var v struct{ N int }
				if err := json.Unmarshal(doc, &v); err != nil {
					return err
				}
				n = v.N
			}
			if n != before {
				return fmt.Errorf("%s: counter %d inside the fenced transaction, %d read before it: another writer got in", l.Unit, n, before)
			}
			return tx.Put(ctx, "counters", l.Unit, []byte(`{"n":`+next+`}`))
		},
	}
	_, err = s.Apply(ctx, b)
	return err == nil, err
}
