package testkit

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Schema references in the simulator (issue 14): on 2 of 3 seeds with
// the stream "wire" (drawn from a source of their own, so that the rest
// of the scenario is as without them) its registry also holds schemas
// that refer to others, by subject and version, directly or through a
// schema that refers on: ids 201..264 whose references the registry has,
// and ids 301..364 whose reference (subject gone, version 3) it does not
// have. Each burst writes some messages under the two ids of its own, so
// that an outage meets reference lookups not made yet, and once or twice
// the registry fails only its subjects' versions (the reference lookups)
// for 1 to 10 s. The documented behaviour (README, "Schema registry
// formats"): a reference the registry does not find dead-letters the
// message with `schema id N: its reference "name" (subject S version V)
// not found in the registry`; a lookup the registry could not answer is
// an outage, retried, never a dead letter. Checked at the end (check):
// every message written under an id whose reference is missing is a dead
// letter with exactly that reason (spelled out here, not asked of the
// decoder), and no message under an id whose references the registry has
// is dead-lettered for its schema.

const (
	simRefOK      = 200 // + the burst's id: references the registry has
	simRefMissing = 300 // + the burst's id: a reference the registry lacks
)

// simRefs are the wire stream's schemas with references, nil when the
// seed has none.
type simRefs struct {
	// missing: "unit@position" -> the reason its dead letter must have
	missing map[string]string
	// ok: "unit@position" -> the schema id of a message under an id whose
	// references resolve
	ok map[string]int
}

// drawRefs registers the schemas with references in reg on 2 seeds of 3
// and schedules the outages of its subjects' versions.
func drawRefs(c *Cluster, seed uint64, reg *MemRegistry, step func(time.Duration, string, ...any)) *simRefs {
	rng := rand.New(rand.NewPCG(seed^0x14c, seed+0x14d))
	if rng.IntN(3) == 0 {
		return nil
	}
	obj := brokers.RegisteredSchema{Type: "JSON", Text: `{"type":"object"}`}
	ref := func(name, subject string, version int) []brokers.SchemaReference {
		return []brokers.SchemaReference{{Name: name, Subject: subject, Version: version}}
	}
	on := func(name string, refs []brokers.SchemaReference) brokers.RegisteredSchema {
		return brokers.RegisteredSchema{Type: "JSON", Text: `{"$ref":"` + name + `"}`, References: refs}
	}
	reg.AddVersion("common", 1, obj)
	reg.AddVersion("outer", 1, on("common.json", ref("common.json", "common", 1)))
	reg.AddVersion("mid", 1, on("gone.json", ref("gone.json", "gone", 3))) // gone/3 is never registered
	reg.mu.Lock()
	for id := 1; id <= simWireIDs; id++ {
		if id%2 == 1 { // directly
			reg.schemas[simRefOK+id] = on("common.json", ref("common.json", "common", 1))
			reg.schemas[simRefMissing+id] = on("gone.json", ref("gone.json", "gone", 3))
		} else { // through a schema that refers on
			reg.schemas[simRefOK+id] = on("outer.json", ref("outer.json", "outer", 1))
			reg.schemas[simRefMissing+id] = on("mid.json", ref("mid.json", "mid", 1))
		}
	}
	reg.mu.Unlock()
	step(0, "stream wire: schemas %d.. refer to others the registry has, schemas %d.. to one it does not have", simRefOK+1, simRefMissing+1)
	at := time.Duration(rng.Int64N(int64(15 * time.Second)))
	for range 1 + rng.IntN(2) {
		d := time.Second + time.Duration(rng.Int64N(int64(9*time.Second)))
		step(at, "schema registry fails its subjects' versions (the reference lookups) for %s", d)
		c.At(at, func() { c.Disturb("registry-refs"); reg.SetRefsDown(true) })
		c.At(at+d, func() { reg.SetRefsDown(false) })
		c.At(at+d+20*time.Second, func() { c.Undisturb("registry-refs") })
		at += d + time.Duration(rng.Int64N(int64(10*time.Second)))
	}
	return &simRefs{missing: map[string]string{}, ok: map[string]int{}}
}

// id is the schema id message i of a burst of id is framed with: some
// refer to others (i%7 is 3: ids whose references resolve, 5: one whose
// reference is missing), the rest keep id.
func (r *simRefs) id(id, i int) int {
	switch {
	case r == nil:
	case i%7 == 3:
		return simRefOK + id
	case i%7 == 5:
		return simRefMissing + id
	}
	return id
}

// published notes message m (as framed, under schema id sid) published
// to unit at pos.
func (r *simRefs) published(unit string, pos []string, sid int, m brokers.Message, maxBytes int) {
	if r == nil || len(pos) != 1 || len(m.Value) > maxBytes {
		return // an oversize message is dead-lettered for its size
	}
	key := unit + "@" + pos[0]
	switch {
	case sid > simRefMissing && sid <= simRefMissing+simWireIDs:
		r.missing[key] = fmt.Sprintf(`schema id %d: its reference "gone.json" (subject gone version 3) not found in the registry`, sid)
	case sid > simRefOK && sid <= simRefOK+simWireIDs:
		r.ok[key] = sid
	}
}

// check is the references invariant over wire's dead letters dls.
func (r *simRefs) check(c *Cluster, dls []persistence.DeadLetter) {
	if r == nil {
		return
	}
	byKey := map[string]persistence.DeadLetter{}
	for _, dl := range dls {
		byKey[dl.Unit+"@"+dl.Position] = dl
	}
	for _, key := range slices.Sorted(maps.Keys(r.missing)) {
		want := r.missing[key]
		dl, ok := byKey[key]
		switch {
		case !ok:
			c.check("wire-refs", fmt.Sprintf("%s: written under a schema whose reference the registry does not have, not dead-lettered (want %q)", key, want))
		case decode.ReasonWithTraceID(want, decode.ReasonTraceID(dl.Reason)) != dl.Reason:
			c.check("wire-refs", fmt.Sprintf("%s: dead-lettered with %q, want %q", key, dl.Reason, want))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(r.ok)) {
		// "schema id N: ..." is the schema's fault (not found, a reference
		// missing, unusable); "schema id N (json_schema): ..." the body's
		if dl, ok := byKey[key]; ok && strings.HasPrefix(dl.Reason, fmt.Sprintf("%s%d:", decode.PrefixSchema, r.ok[key])) {
			c.check("wire-refs", fmt.Sprintf("%s: its schema's references are in the registry, but it was dead-lettered with %q", key, dl.Reason))
		}
	}
}
