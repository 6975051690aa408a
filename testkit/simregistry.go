package testkit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// A schema registry in the simulator (issue 14): the stream "wire" reads
// the Confluent wire format (JSON Schema) with its schemas from an
// in-memory registry that goes down now and then. Each burst of the
// publishing writes its messages under a schema id of its own (so that
// an outage meets ids the nodes have not fetched yet) and some under an
// id the registry does not know. Checked at the end: every dead letter of
// wire is one that decoding its message with the registry up gives too,
// with the same reason: an outage never dead-letters a message. Schemas
// with references, some missing, are simregistryref.go's.

// MemRegistry is a schema registry in memory (a decode.SchemaFetcher)
// that can be taken down, wholly or for its subjects' versions only (the
// lookups of references). Safe for concurrent use.
type MemRegistry struct {
	mu       sync.Mutex
	down     bool
	refsDown bool
	schemas  map[int]brokers.RegisteredSchema
	versions map[string]brokers.RegisteredSchema // "subject/version"
	asked    map[int]int
}

// NewMemRegistry is a registry holding schemas by id.
func NewMemRegistry(schemas map[int]brokers.RegisteredSchema) *MemRegistry {
	return &MemRegistry{schemas: schemas, versions: map[string]brokers.RegisteredSchema{}, asked: map[int]int{}}
}

// errRegistryDown is what a down MemRegistry answers.
var errRegistryDown = errors.New("connection refused (simulated registry outage)")

// SchemaByID implements decode.SchemaFetcher.
func (r *MemRegistry) SchemaByID(_ context.Context, id int) (brokers.RegisteredSchema, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[id]++
	if r.down {
		return brokers.RegisteredSchema{}, false, errRegistryDown
	}
	s, ok := r.schemas[id]
	return s, ok, nil
}

// SchemaByVersion implements decode.SchemaFetcher: a subject's version
// added by AddVersion, the way a schema's references are looked up.
func (r *MemRegistry) SchemaByVersion(_ context.Context, subject string, version int) (brokers.RegisteredSchema, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down || r.refsDown {
		return brokers.RegisteredSchema{}, false, errRegistryDown
	}
	s, ok := r.versions[subject+"/"+strconv.Itoa(version)]
	return s, ok, nil
}

// AddVersion registers s as version of subject (a schema that others
// refer to).
func (r *MemRegistry) AddVersion(subject string, version int, s brokers.RegisteredSchema) {
	r.mu.Lock()
	r.versions[subject+"/"+strconv.Itoa(version)] = s
	r.mu.Unlock()
}

// SetDown takes the registry down or brings it back.
func (r *MemRegistry) SetDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// SetRefsDown makes the registry fail its subjects' versions only (the
// schemas by id answer), or brings them back: the decoder then meets the
// outage while it fetches a schema's references.
func (r *MemRegistry) SetRefsDown(down bool) {
	r.mu.Lock()
	r.refsDown = down
	r.mu.Unlock()
}

// Asked is how many times schema id was asked for.
func (r *MemRegistry) Asked(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[id]
}

// simWire is the wire source of a run.
type simWire struct {
	reg   *MemRegistry
	spec  actors.SourceSpec
	wl    *Workload
	next  int // the schema id of the next burst
	parts int
	refs  *simRefs // schemas with references (simregistryref.go)
}

const (
	simWireIDs     = 64  // schema ids 1..64 are registered
	simWireUnknown = 999 // not registered
)

// WireFrame frames body in the Confluent wire format with schema id.
func WireFrame(id int, body []byte) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, body...)
}

// drawWire adds the wire source on some seeds (3 in 10, drawn from a
// source of its own, so that the other seeds' scenarios stay as they
// were) and schedules 1 or 2 registry outages of 1 to 10 s, the first
// sometimes from the start. Not with a store that limits batch bytes
// (its refusals would be dead letters of their own).
func drawWire(c *Cluster, seed uint64, limited bool, step func(time.Duration, string, ...any)) (*simWire, error) {
	rng := rand.New(rand.NewPCG(seed^0x14a, seed+0x14b))
	if rng.IntN(10) >= 3 || limited {
		return nil, nil
	}
	schemas := map[int]brokers.RegisteredSchema{}
	for id := 1; id <= simWireIDs; id++ {
		schemas[id] = brokers.RegisteredSchema{Type: "JSON", Text: `{"type":"object"}`}
	}
	w := &simWire{reg: NewMemRegistry(schemas), wl: NewWorkload(seed + 14), next: 1, parts: 1 + rng.IntN(3)}
	w.wl.MaxBytes = 4096
	w.spec = actors.SourceSpec{Name: "wire", Type: "memory", KeyField: "id", BatchSize: 10 + rng.IntN(100), MaxWait: 200 * time.Millisecond,
		MaxMessageBytes: 4096 + 5, Format: decode.FormatJSONSchema, Registry: decode.NewRegistryFrom("sim-registry", w.reg, 0)}
	if _, err := c.AddStream(w.spec, w.parts); err != nil {
		return nil, err
	}
	step(0, "stream wire: JSON Schema in the wire format, %d partitions, its schemas from a registry", w.parts)
	w.refs = drawRefs(c, seed, w.reg, step)
	at := time.Duration(0)
	if rng.IntN(2) == 0 {
		at = time.Duration(rng.Int64N(int64(15 * time.Second)))
	}
	for range 1 + rng.IntN(2) {
		d := time.Second + time.Duration(rng.Int64N(int64(9*time.Second)))
		step(at, "schema registry down for %s", d)
		c.At(at, func() { c.Disturb("registry"); w.reg.SetDown(true) })
		c.At(at+d, func() { w.reg.SetDown(false) })
		c.At(at+d+20*time.Second, func() { c.Undisturb("registry") })
		at += d + time.Duration(rng.Int64N(int64(10*time.Second)))
	}
	return w, nil
}

// publish writes n messages of the next schema id (every 13th under the
// unknown id, some under ids with references: simRefs.id) to wire's
// partitions.
func (w *simWire) publish(c *Cluster, n int) {
	if w == nil {
		return
	}
	id := min(w.next, simWireIDs)
	w.next++
	for i, m := range w.wl.Batch(n) {
		sid := 0
		if !m.Tombstone && len(m.Value) > 0 {
			sid = w.refs.id(id, i)
			if i%13 == 12 {
				sid = simWireUnknown
			}
			m.Value = WireFrame(sid, m.Value)
		}
		part := fmt.Sprint(i % w.parts)
		pos, _ := c.Publish("wire", part, m)
		w.refs.published("wire/"+part, pos, sid, m, w.spec.MaxMessageBytes)
	}
}

// check is the wire invariant: each dead letter of wire is what decoding
// its message with the registry up makes of it.
func (w *simWire) check(c *Cluster) {
	if w == nil {
		return
	}
	ctx := context.Background()
	dls, err := c.Store().DeadLetters(ctx, persistence.DeadLetterFilter{Source: "wire"})
	if err != nil {
		c.check("wire", "read the dead letters: "+err.Error())
		return
	}
	w.refs.check(c, dls)
	w.reg.SetDown(false)
	w.reg.SetRefsDown(false)
	dc := decode.Config{KeyField: w.spec.KeyField, MaxBytes: w.spec.MaxMessageBytes, Format: w.spec.Format,
		Registry: decode.NewRegistryFrom("check", w.reg, 0)}
	for _, dl := range dls {
		if dl.Cut() {
			continue
		}
		key, err := decode.KeyBytes(dl.MsgKey)
		if err != nil {
			c.check("wire", err.Error())
			continue
		}
		m := brokers.Message{Position: dl.Position, Key: key, Value: dl.Payload}
		if err := dc.Resolve(ctx, []brokers.Message{m}); err != nil {
			c.check("wire", err.Error())
			continue
		}
		op := dc.Record(m)
		switch want := decode.ReasonWithTraceID(op.Reason, decode.ReasonTraceID(dl.Reason)); {
		case op.Kind != persistence.OpDeadLetter:
			c.check("wire", fmt.Sprintf("%s at %s dead-lettered (%s), but it decodes with the registry up", dl.Unit, dl.Position, dl.Reason))
		case want != dl.Reason:
			c.check("wire", fmt.Sprintf("%s at %s dead-lettered with %q, want %q", dl.Unit, dl.Position, dl.Reason, want))
		}
	}
}
