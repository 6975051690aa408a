package actors

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/persistence"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

// Script-driven tests of one unit actor (architecture §11, "Unit
// scripts"), in the style of etcd raft's testdata: each file of
// testdata/unit is a list of commands, each followed by "----" and what
// the unit did in answer — jobs issued, store and broker calls of the jobs
// the script completes, timers armed and fired, trace events, what it
// told its parent and the leaser, and its tree row when it changed.
//
//	go test ./actors -run TestUnitScripts -rewrite
//
// writes the output the unit gives now into the files; review the diff.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of actors/testdata/unit/*.txt")

func TestUnitScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "unit", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/unit")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runUnitScript(t, f) })
	}
	// The scripts together take every transition the life cycle allows
	// (staying in a phase counts: a retry that fails again, another
	// acquire while the lease is held elsewhere).
	for to := phaseStarting; to <= phaseStopped; to++ {
		for _, from := range phaseFrom[to] {
			if _, ok := coveredTransitions.Load(phaseTransition{from, to}); !ok {
				t.Errorf("no script takes the transition %s -> %s", from, to)
			}
		}
	}
}

// phaseTransition is a unit's move from one phase to another.
type phaseTransition struct{ from, to unitPhase }

// coveredTransitions are the transitions the scripts took (phaseTransition
// → true), filled by nodeEnv.observePhase.
var coveredTransitions sync.Map

// scriptBlock is one command of a script with its expected output.
type scriptBlock struct {
	line    int      // of the command
	comment []string // lines before the command
	cmd     string
	want    string
}

func parseScript(r io.Reader) ([]scriptBlock, error) {
	var blocks []scriptBlock
	var comment []string
	sc := bufio.NewScanner(r)
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		switch {
		case strings.TrimSpace(l) == "":
			if len(comment) > 0 {
				comment = append(comment, "")
			}
			continue
		case strings.HasPrefix(l, "#"):
			comment = append(comment, l)
			continue
		}
		b := scriptBlock{line: n, comment: comment, cmd: strings.TrimSpace(l)}
		comment = nil
		if sep, ok := next(); !ok || sep != "----" {
			return nil, fmt.Errorf("line %d: %q must be followed by ----", b.line, b.cmd)
		}
		var want []string
		for {
			o, ok := next()
			if !ok || strings.TrimSpace(o) == "" {
				break
			}
			want = append(want, o)
		}
		b.want = strings.Join(want, "\n")
		blocks = append(blocks, b)
	}
	return blocks, sc.Err()
}

func runUnitScript(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseScript(f)
	_ = f.Close()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	w := &unitWorld{t: t, now: scriptEpoch}
	defer w.close()
	var out strings.Builder
	failed := false
	for i, b := range blocks {
		got, err := w.do(b.cmd)
		if err != nil {
			t.Errorf("%s:%d: %s: %v", path, b.line, b.cmd, err)
		}
		if got != b.want && !*rewrite {
			failed = true
			t.Errorf("%s:%d: %s\n%s", path, b.line, b.cmd, lineDiff(b.want, got))
		}
		if i > 0 {
			out.WriteString("\n")
		}
		for _, c := range b.comment {
			out.WriteString(c + "\n")
		}
		out.WriteString(b.cmd + "\n----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Logf("rewrite the expected output with: go test ./actors -run TestUnitScripts -rewrite")
	}
}

// lineDiff shows want and got line by line (a longest common subsequence):
// "- " only expected, "+ " only got.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return out.String()
}

// unitWorld is one unit actor and everything around it (unitworld_test.go).
type unitWorld struct {
	t         *testing.T
	now       time.Time
	out       []string
	timers    []*scriptTimer
	nextTimer int
	mailboxes []func()
	jobs      []*scriptJob
	nextJob   int

	ne          *nodeEnv
	cancel      context.CancelFunc
	spec        *SourceSpec
	part        brokers.Partition
	unitID      string
	gen         uint64
	exit        atomic.Int32
	unit        *actor.PID
	parent      *actor.PID
	store       *scriptStore
	mem         *memstore.Store
	stream      *scriptStream
	broker      *memory.Stream // nil for a queue
	queue       *memory.Queue  // nil for a stream
	squeue      *scriptQueue
	produced    int
	renewEvery  time.Duration // the leaser's round, when it runs
	extendEvery time.Duration // a queue unit's deadline extension
	lastRow     string
	passivate   bool            // start passivate: the unit passivates (PassivateAfter 10 s)
	handoff     passiveHandoff  // where it leaves its record
	record      *passiveUnit    // the passive unit's record, kept by the parent
	nextWake    int             // the last Wake arrangement's number
	refuse      map[string]bool // positions the handler refuses (Permanent)
}

// handle is the Handler of a source started with handler: it prints the
// batch and refuses the first message handler-refuses named.
func (w *unitWorld) handle(_ context.Context, _ persistence.Tx, b Batch) error {
	var pos []string
	for _, m := range b.Messages {
		pos = append(pos, m.Position)
	}
	w.printf("  handler: %s token=%d [%s]", b.IdempotencyKey, b.Token, strings.Join(pos, " "))
	for _, m := range b.Messages {
		if w.refuse[m.Position] {
			delete(w.refuse, m.Position)
			w.printf("  handler: refuses %s", m.Position)
			return Permanent(m, errors.New("no such customer"))
		}
	}
	return nil
}

func (w *unitWorld) close() {
	if w.ne == nil {
		return
	}
	w.cancel()
	w.ne.system.Shutdown()
}

// do runs one command and returns what happened; an error is a mistake
// in the script (or a harness that no longer fits the unit).
func (w *unitWorld) do(line string) (string, error) {
	args, err := splitArgs(line)
	if err == nil && w.ne == nil && args[0] != "start" {
		err = errors.New("start first")
	}
	if err == nil {
		err = w.command(args[0], args[1:])
	}
	if err != nil {
		w.printf("error: %v", err)
	}
	return w.flush(), err
}

func (w *unitWorld) command(cmd string, args []string) error {
	switch cmd {
	case "start":
		return w.start(args)
	case "produce":
		if len(args) != 1 {
			return errors.New("produce N")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		if err := w.produce(n); err != nil {
			return err
		}
	case "complete":
		return w.complete(args)
	case "tick":
		if len(args) != 1 {
			return errors.New("tick DURATION | tick next")
		}
		if args[0] == "next" {
			t := w.nextDue()
			if t == nil {
				return errors.New("no timer pending")
			}
			w.advance(t.at)
			return nil
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		w.advance(w.now.Add(d))
		return nil
	case "pause", "resume": // an operator's control of the unit reaches its node
		w.control(cmd == "pause")
	case "seek": // review: an operator's seek reaches the unit
		tg, err := brokers.ParseSeekTarget(args[0])
		if err != nil {
			return err
		}
		w.ne.root().Send(w.unit, &seekUnit{Seek: Seek{Unit: w.unitID, To: args[0]}, target: tg})
	case "stop":
		w.ne.root().Send(w.unit, &stopUnit{})
	case "kill":
		w.ne.root().Stop(w.unit)
	case "restart":
		w.ne.root().Send(w.parent, &restartScriptUnit{})
	case "activate": // the parent spawns the passive unit again
		how := map[string]resumeKind{"fetch": resumeFetch, "stop": resumeStop, "lost": resumeLost}
		if len(args) != 1 || how[args[0]] == 0 {
			return errors.New("activate fetch|stop|lost")
		}
		w.ne.root().Send(w.parent, &activateScriptUnit{how: how[args[0]]})
	case "other":
		if len(args) != 1 {
			return errors.New("other acquire|steal|release")
		}
		return w.other(args[0])
	case "finished-by-other":
		if len(args) != 1 {
			return errors.New("finished-by-other PARTITION")
		}
		return w.finishedByOther(args[0])
	case "split": // the partition is closed by a reshard (two children)
		if w.broker == nil {
			return errors.New("split: not a stream")
		}
		ids, err := w.broker.Split(w.part.ID)
		if err != nil {
			return err
		}
		w.printf("partition %s closed, children %s", w.part.ID, strings.Join(ids, " "))
		return nil
	case "trim": // retention deletes the messages before a position
		if len(args) != 1 {
			return errors.New("trim POSITION")
		}
		if w.broker == nil {
			return errors.New("trim: not a stream")
		}
		if err := w.broker.Trim(w.part.ID, args[0]); err != nil {
			return err
		}
		w.printf("partition %s trimmed before %s", w.part.ID, args[0])
		return nil
	case "handler-refuses": // the handler returns Permanent for a message
		if len(args) != 1 || w.spec.Handler == nil {
			return errors.New("handler-refuses POSITION (start handler)")
		}
		w.refuse[args[0]] = true
		return nil
	case "pending":
		for _, s := range w.pendingList() {
			w.printf("%s", s)
		}
		return nil
	case "row":
		r, _ := w.row()
		w.lastRow = rowString(r)
		w.printf("row: %s", w.lastRow)
		return nil
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	w.settle()
	return nil
}

// start builds the world and spawns the unit: a stream source "s" with one
// partition "0" of a memory stream, node n1 in a view of n1 and n2.
//
//	start [queue] [handler] [max-failures=N] [batch-size=N] [batch-bytes=N] [parents=a,b] [on-reset=earliest|latest|fail] [renew] [ahead] [wake] [passivate]
//
// passivate lets the unit passivate (unit_passive.go) after 7 s without
// messages: the parent keeps its record and prints it, and "activate
// fetch|stop|lost" spawns it again from the record.
// batch-size is 10 unless given. ahead lets a stream unit fetch ahead of
// its applies (the default of Tuning; it does when a fetch comes back full
// or with a lag): the other scripts pin the sequential loop, so that each
// of their steps is one job. wake makes the stream's readers brokers.Wakers
// (as the memory reader is): an empty fetch is followed by no job, the
// unit waits for the reader's call or the WakeSafety timer (1 minute here).
// handler gives the source a Handler (handler-refuses makes it return
// Permanent for a message). queue makes it a queue source "s" of one slot (ack deadline 4.5 s, so its
// deadline is extended every 1.5 s; nack delay 500 ms). renew runs the node's real leaser (renewal rounds every
// 2 s); without it the harness only prints what the unit registers and
// drops. A start in a started script begins a new world (time, jobs and
// store start afresh).
func (w *unitWorld) start(args []string) error {
	if w.ne != nil {
		// a new world: the next case of the same script
		w.close()
		*w = unitWorld{t: w.t, now: scriptEpoch, out: w.out}
	}
	kv, flags, err := keyValues(args)
	if err != nil {
		return err
	}
	maxFailures, batchBytes, batchSize := 3, 0, 10
	if v, ok := kv["max-failures"]; ok {
		if maxFailures, err = strconv.Atoi(v); err != nil {
			return err
		}
	}
	if v, ok := kv["batch-size"]; ok {
		if batchSize, err = strconv.Atoi(v); err != nil {
			return err
		}
	}
	if v, ok := kv["batch-bytes"]; ok {
		if batchBytes, err = strconv.Atoi(v); err != nil {
			return err
		}
	}
	clk := scriptClock{w}
	w.mem = memstore.New(memstore.Config{Clock: clk})
	w.store = &scriptStore{Store: w.mem, w: w, inject: map[string]error{}}
	s := SourceSpec{Name: "s", KeyField: "id", BatchSize: batchSize, BatchBytes: batchBytes, MaxMessageBytes: batchBytes, MaxDeadLetterBytes: batchBytes,
		MaxWait: time.Second, MaxConsecutiveFailures: maxFailures, LeaseTTL: 9 * time.Second}
	w.part = brokers.Partition{ID: "0"}
	w.refuse = map[string]bool{}
	if flags["queue"] {
		w.queue, _ = memory.NewQueue(memory.QueueConfig{AckDeadline: 4500 * time.Millisecond, Clock: clk})
		w.squeue = &scriptQueue{Queue: w.queue, w: w, inject: map[string]error{}}
		s.Queue, s.AckDeadline, s.NackDelay = w.squeue, 4500*time.Millisecond, 500*time.Millisecond
		w.part = brokers.Partition{ID: "slot-0"}
	} else {
		w.broker, _ = memory.NewStream(memory.StreamConfig{Partitions: 1, Clock: clk})
		w.stream = &scriptStream{Stream: w.broker, w: w, inject: map[string]error{}, wake: flags["wake"]}
		s.Stream = w.stream
	}
	spec, err := s.withDefaults()
	if err != nil {
		return err
	}
	switch kv["on-reset"] {
	case "", "earliest":
	case "latest":
		spec.OnPositionReset = ResetLatest
	case "fail":
		spec.OnPositionReset = ResetFail
	default:
		return fmt.Errorf("on-reset=%s", kv["on-reset"])
	}
	if flags["handler"] {
		spec.Handler = w.handle
	}
	w.spec = &spec
	if w.queue != nil {
		w.extendEvery = w.spec.AckDeadline / 3 // architecture §13
	}
	if v, ok := kv["parents"]; ok {
		w.part.Parents = strings.Split(v, ",")
	}
	w.unitID = spec.Name + "/" + w.part.ID
	w.passivate = flags["passivate"]
	env := Env{
		Node: "n1", Clock: clk, Rand: NewRand(1), Dispatcher: scriptDispatcher{w}, Executor: scriptExecutor{w},
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}, {Name: "n2", State: placement.StateAlive}}},
		Store:      w.store,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Trace: func(e Event) {
			w.printf("%s", strings.TrimSpace("trace: "+e.Kind+" "+e.Detail))
		},
		Tuning: Tuning{
			RetryBase: 100 * time.Millisecond, RetryCap: 5 * time.Second, AcquireRetry: 250 * time.Millisecond,
			ParentPoll: time.Second, StopTimeout: 10 * time.Second, RenewInterval: 2 * time.Second,
			TakeoverMargin: 500 * time.Millisecond, HealthyAfter: 30 * time.Second, PositionCheck: 30 * time.Second,
			NoFetchAhead: !flags["ahead"], WakeSafety: time.Minute, PassivateAfter: 7 * time.Second,
		},
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.ne = &nodeEnv{env: env, tuning: env.Tuning.withDefaults(), reg: newRegistry(env.Node), metrics: noMetrics{}, system: system, ctx: ctx,
		observePhase: func(_ string, from, to unitPhase) {
			coveredTransitions.Store(phaseTransition{from, to}, true)
			if from != to {
				w.printf("phase: %s -> %s", from, to)
			}
		}}
	w.ne.reg.addSource(spec.Name, spec.Type)
	sl := &scriptLeaser{w: w}
	if flags["renew"] {
		sl.real = newLeaser(w.ne, spec.LeaseTTL, newLeaseTable())
		w.renewEvery = sl.real.every
	}
	lpid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return sl }, w.ne.props()...), "leaser")
	if err != nil {
		return err
	}
	w.ne.leaser = lpid
	w.parent, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &scriptParent{w: w} }, w.ne.props()...), "source-s")
	if err != nil {
		return err
	}
	w.settle()
	w.ne.root().Send(w.parent, &spawnScriptUnit{})
	w.settle()
	return nil
}

// produce appends n messages {"id":"kN"} to the partition.
func (w *unitWorld) produce(n int) error {
	msgs := make([]brokers.Message, n)
	for i := range msgs {
		w.produced++
		msgs[i] = brokers.Message{Key: []byte(fmt.Sprintf("k%d", w.produced)), Value: []byte(fmt.Sprintf(`{"id":"k%d"}`, w.produced))}
	}
	if w.queue != nil {
		w.printf("sent %s", strings.Join(w.queue.Send(msgs...), " "))
		return nil
	}
	pos, err := w.broker.Produce(w.part.ID, msgs...)
	if err != nil {
		return err
	}
	w.printf("produced %s", strings.Join(pos, " "))
	return nil
}

// complete runs a pending job and delivers its result:
//
//	complete LABEL|#ID [msgs=N] [after=N] [error KIND [MESSAGE]]
//
// msgs=N produces N messages first; after=N produces N messages after the
// job ran, before the unit gets its result. error makes the job's main call fail
// (acquire, apply, release, renew: the store's call of that name; parents:
// the store's checkpoint read; open, fetch: the broker's). KIND is, for
// the store, transient, permanent (persistence.ErrPermanent), lease-lost,
// held, busy; for the broker, transient, fatal (not retryable), gone
// (ErrPositionGone), unknown (ErrPositionUnknown).
func (w *unitWorld) complete(args []string) error {
	if len(args) == 0 {
		return errors.New("complete LABEL|#ID ...")
	}
	j := w.pendingJob(args[0])
	if j == nil {
		return fmt.Errorf("no pending job %s", args[0])
	}
	rest := args[1:]
	var injectErr []string
	for i, a := range rest {
		if a == "error" {
			injectErr, rest = rest[i+1:], rest[:i]
			break
		}
	}
	kv, flags, err := keyValues(rest)
	if err != nil {
		return err
	}
	if len(flags) > 0 {
		return fmt.Errorf("unknown arguments %v", flags)
	}
	if v, ok := kv["msgs"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		if err := w.produce(n); err != nil {
			return err
		}
	}
	var target map[string]error
	var op string
	if injectErr != nil {
		if len(injectErr) == 0 {
			return errors.New("error KIND [MESSAGE]")
		}
		msg := strings.Join(injectErr[1:], " ")
		var e error
		target, op, e, err = w.injection(j.label, injectErr[0], msg)
		if err != nil {
			return err
		}
		target[op] = e
	}
	after := 0
	if v, ok := kv["after"]; ok {
		if after, err = strconv.Atoi(v); err != nil {
			return err
		}
	}
	if err := w.run(j, func() error {
		if after > 0 {
			return w.produce(after)
		}
		return nil
	}); err != nil {
		return err
	}
	if target != nil {
		if _, unused := target[op]; unused {
			delete(target, op)
			w.printf("(the injected error was not used: the job made no %s call)", op)
		}
	}
	return nil
}

func (w *unitWorld) injection(label, kind, msg string) (map[string]error, string, error, error) {
	text := func(def string) error {
		if msg == "" {
			msg = def
		}
		return errors.New(msg)
	}
	store := map[string]string{"acquire": "acquire", "apply": "apply", "release": "release", "renew": "renew", "renew-one": "renew",
		"parents": "checkpoint"}
	if op, ok := store[label]; ok {
		var e error
		switch kind {
		case "transient":
			e = text("connection reset by peer")
		case "permanent":
			e = persistence.Refused(text("value too long for column"))
		case "lease-lost":
			e = persistence.ErrLeaseLost
		case "held":
			e = fmt.Errorf("acquire %s: %w", w.unitID, persistence.ErrLeaseHeld)
		case "busy":
			e = fmt.Errorf("acquire %s: %w", w.unitID, persistence.ErrBusy)
		default:
			return nil, "", nil, fmt.Errorf("store error kind %q", kind)
		}
		return w.store.inject, op, e, nil
	}
	if w.queue != nil && (label == "open" || label == "fetch" || label == "ack" || label == "nack") {
		e := brokerErr(label, kind, false, text)
		if e == nil {
			return nil, "", nil, fmt.Errorf("queue error kind %q", kind)
		}
		return w.squeue.inject, label, e, nil
	}
	if label == "open" || label == "fetch" {
		e := brokerErr(label, kind, true, text)
		if e == nil {
			return nil, "", nil, fmt.Errorf("broker error kind %q", kind)
		}
		return w.stream.inject, label, e, nil
	}
	return nil, "", nil, fmt.Errorf("cannot inject an error into a %s job", label)
}

// brokerErr is the error of a kind a script injects into a broker call op:
// transient or fatal, and for a stream also gone or unknown (a position);
// text is the error of the script's message, or of def where it has none.
// It is nil for another kind.
func brokerErr(op, kind string, stream bool, text func(def string) error) error {
	switch {
	case kind == "transient":
		return &brokers.Error{Op: op, Retryable: true, Err: text("broker not available")}
	case kind == "fatal":
		return &brokers.Error{Op: op, Err: text("authorization failed")}
	case kind == "gone" && stream:
		return &brokers.Error{Op: op, Err: brokers.ErrPositionGone}
	case kind == "unknown" && stream:
		return &brokers.Error{Op: op, Err: brokers.ErrPositionUnknown}
	}
	return nil
}

// other acts as node n2 on the unit's lease, directly on the store.
func (w *unitWorld) other(what string) error {
	c := context.Background()
	switch what {
	case "acquire": // as a live member would
		l, err := w.mem.Acquire(c, persistence.AcquireRequest{Unit: w.unitID, Owner: "n2", TTL: w.spec.LeaseTTL,
			Live: []string{"n1", "n2"}, Stale: time.Second})
		w.printf("n2 acquires %s -> %s", w.unitID, leaseOrErr(l, err))
	case "steal": // as a member that sees n1 gone would, at once
		l, err := w.mem.Acquire(c, persistence.AcquireRequest{Unit: w.unitID, Owner: "n2", TTL: w.spec.LeaseTTL,
			Live: []string{"n2"}})
		w.printf("n2 takes %s over -> %s", w.unitID, leaseOrErr(l, err))
	case "release":
		ls, err := w.mem.List(c)
		if err != nil {
			return err
		}
		for _, l := range ls {
			if l.Unit == w.unitID && l.Owner == "n2" {
				w.printf("n2 releases %s token=%d -> %s", l.Unit, l.Token, errOr(w.mem.Release(c, l), "ok"))
				return nil
			}
		}
		return errors.New("n2 holds no lease")
	default:
		return fmt.Errorf("other %s", what)
	}
	return nil
}

// finishedByOther records partition id as read to its end: n2 acquires it,
// writes a finished checkpoint and releases it.
func (w *unitWorld) finishedByOther(id string) error {
	c, unit := context.Background(), w.spec.Name+"/"+id
	l, err := w.mem.Acquire(c, persistence.AcquireRequest{Unit: unit, Owner: "n2", TTL: w.spec.LeaseTTL, Live: []string{"n2"}})
	if err != nil {
		return err
	}
	_, err = w.mem.Apply(c, &persistence.Batch{Source: w.spec.Name, Unit: unit, Lease: l, Checkpoint: "9", Finished: true})
	if err == nil {
		err = w.mem.Release(c, l)
	}
	w.printf("n2 finished %s at 9 and released it -> %s", unit, errOr(err, "ok"))
	return err
}

// splitArgs splits a command line at spaces; "double quotes" keep one
// argument together.
func splitArgs(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, has := false, false
	for _, r := range line {
		switch {
		case r == '"':
			in, has = !in, true
		case r == ' ' && !in:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if in {
		return nil, errors.New("unterminated quote")
	}
	if has {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}

// keyValues splits key=value arguments from bare flags.
func keyValues(args []string) (map[string]string, map[string]bool, error) {
	kv, flags := map[string]string{}, map[string]bool{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			flags[a] = true
		}
	}
	return kv, flags, nil
}
