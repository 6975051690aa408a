package gossip

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/actors/placement"
)

func tagsN(n int) []placement.SourceTag {
	out := make([]placement.SourceTag, n)
	for i := range out {
		out[i] = placement.SourceTag{ID: placement.SourceID("source-" + string(rune('A'+i%26)) + strings.Repeat("x", i/26)), Units: uint32(i + 1)}
	}
	return sortedTags(out)
}

func ids(tags []placement.SourceTag) []uint32 {
	out := make([]uint32, len(tags))
	for i, t := range tags {
		out[i] = t.ID
	}
	return out
}

// Issue 9, item 12: the sources a node runs are gossiped from its first
// metadata on, and every SetSources reaches the others.
func TestSourcesGossiped(t *testing.T) {
	initial := []placement.SourceTag{{ID: 70, Units: 1}, {ID: 3}} // not sorted: Join sorts
	a, b, c := startThree(t, Config{Name: "a", Sources: initial})
	sourcesOf := func(m *Membership, name string) placement.Member {
		mem, _ := find(m.Members(), name)
		return mem
	}
	wantA := []placement.SourceTag{{ID: 3}, {ID: 70, Units: 1}}
	if got := a.Local().Sources; !reflect.DeepEqual(got, wantA) {
		t.Errorf("a.Local().Sources = %v, want %v", got, wantA)
	}
	for _, m := range []*Membership{b, c} {
		if got := sourcesOf(m, "a"); !reflect.DeepEqual(got.Sources, wantA) || got.SourceDigest != 0 {
			t.Errorf("%s sees a's sources %v (digest %d), want %v", m.cfg.Name, got.Sources, got.SourceDigest, wantA)
		}
		if got := sourcesOf(m, "b"); got.Sources != nil || got.SourceDigest != 0 {
			t.Errorf("%s sees b, which said nothing, with sources %v digest %d", m.cfg.Name, got.Sources, got.SourceDigest)
		}
	}

	// b announces its sources: Local and b's watchers see them at once,
	// the others through gossip.
	var mu sync.Mutex
	var watched []placement.SourceTag
	stop := b.Watch(func() {
		mu.Lock()
		watched = b.Local().Sources
		mu.Unlock()
	})
	defer stop()
	tags := []placement.SourceTag{{ID: 9, Units: 44}, {ID: 5, Units: 0xffffffff}}
	want := []placement.SourceTag{{ID: 5, Units: 0xffffffff}, {ID: 9, Units: 44}}
	if err := b.SetSources(t.Context(), tags); err != nil {
		t.Fatalf("SetSources: %v", err)
	}
	tags[0].ID = 1 // the caller keeps its slice
	if got := b.Local().Sources; !reflect.DeepEqual(got, want) {
		t.Errorf("b.Local().Sources = %v right after SetSources, want %v", got, want)
	}
	waitUntil(t, 2*time.Second, "b's watcher sees its sources", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reflect.DeepEqual(watched, want)
	})
	took := waitUntil(t, 2*time.Second, "a and c see b's sources", func() bool {
		return reflect.DeepEqual(sourcesOf(a, "b").Sources, want) && reflect.DeepEqual(sourcesOf(c, "b").Sources, want)
	})
	t.Logf("b's sources seen by a and c in %v", took)

	// Running no source is not the same as saying nothing.
	if err := b.SetSources(t.Context(), []placement.SourceTag{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "a sees b running no source", func() bool {
		got := sourcesOf(a, "b")
		return got.Sources != nil && len(got.Sources) == 0 && got.SourceDigest == 0
	})
	if err := b.SetSources(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "a sees b saying nothing about its sources", func() bool {
		got := sourcesOf(a, "b")
		return got.Sources == nil && got.SourceDigest == 0
	})

	// The state and the sources travel together: one does not undo the
	// other.
	if err := a.SetState(t.Context(), placement.StateLeaving); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "c sees a leaving with its sources", func() bool {
		got := sourcesOf(c, "a")
		return got.State == placement.StateLeaving && reflect.DeepEqual(got.Sources, wantA)
	})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.SetSources(ctx, want); !errors.Is(err, context.Canceled) {
		t.Errorf("SetSources with a cancelled ctx = %v, want context.Canceled", err)
	}
}

// Too many sources for 512 bytes: their digest is gossiped instead, and
// the tags come back when they fit again.
func TestSourcesDigestWhenTheyDoNotFit(t *testing.T) {
	many := tagsN(60) // 60 × 8 bytes = 640 bytes before base64
	a := start(t, Config{Name: "a", Sources: many})
	b := start(t, Config{Name: "b", Join: []string{a.Local().Addr}})
	waitUntil(t, 2*time.Second, "a and b see each other", func() bool { return sees(a, "a", "b")() && sees(b, "a", "b")() })

	digest := placement.SourceDigestOf(ids(many))
	if got := a.Local(); got.Sources != nil || got.SourceDigest != digest {
		t.Errorf("a.Local() sources %v digest %d, want nil and %d", got.Sources, got.SourceDigest, digest)
	}
	seen := func() placement.Member { m, _ := find(b.Members(), "a"); return m }
	if got := seen(); got.Sources != nil || got.SourceDigest != digest {
		t.Errorf("b sees a's sources %v digest %d, want nil and %d", got.Sources, got.SourceDigest, digest)
	}
	if _, runs, known := seen().Source(many[7].ID, digest); !runs || known {
		t.Errorf("a node with the same digest: runs %v known %v, want true false", runs, known)
	}

	few := many[:3]
	if err := a.SetSources(t.Context(), few); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "b sees a's few sources in full", func() bool {
		got := seen()
		return reflect.DeepEqual(got.Sources, few) && got.SourceDigest == 0
	})
	if err := a.SetSources(t.Context(), many); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "b sees a's digest again", func() bool {
		got := seen()
		return got.Sources == nil && got.SourceDigest == digest
	})
}

// The largest metadata Validate accepts, with any number of tags of the
// largest values, in either state, fits memberlist's limit, and decodes to
// what was encoded (the tags, or their digest).
func TestMetadataSizeWorstCase(t *testing.T) {
	// Longest debug address and version, then the longest name Validate
	// accepts with them; capacities with the longest JSON form.
	base := Config{
		DebugAddr:   "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
		DebugTLS:    true,
		Version:     strings.Repeat("v", 120),
		Capacity:    -1.2345678901234567e-300,
		MaxCapacity: 1.2345678901234567e-300,
	}
	longest := 0
	for n := 1; n < memberlist.MetaMaxSize; n++ {
		c := base
		c.Name = strings.Repeat("n", n)
		if c.Validate() != nil {
			break
		}
		longest = n
	}
	if longest == 0 {
		t.Fatal("no name is valid")
	}
	// Names that need escaping in JSON count at their escaped length.
	names := []string{strings.Repeat("n", longest), strings.Repeat("<", longest/6)}
	tagsFit := 0
	for _, name := range names {
		c := base
		c.Name = name
		if err := c.Validate(); err != nil {
			t.Fatalf("name of %d bytes: %v", len(name), err)
		}
		for n := 0; n <= 70; n++ {
			tags := make([]placement.SourceTag, n)
			for i := range tags {
				tags[i] = placement.SourceTag{ID: math.MaxUint32 - uint32(i), Units: math.MaxUint32}
			}
			tags = sortedTags(tags)
			for _, s := range []placement.MemberState{placement.StateAlive, placement.StateLeaving} {
				b := newMeta(c, s, tags).encode()
				if len(b) > memberlist.MetaMaxSize {
					t.Fatalf("name %d bytes, %d tags, %s: %d bytes of metadata, limit %d", len(name), n, s, len(b), memberlist.MetaMaxSize)
				}
				got, err := member(&memberlist.Node{Name: name, Meta: b})
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if got.Sources != nil {
					if !reflect.DeepEqual(got.Sources, tags) || got.SourceDigest != 0 {
						t.Fatalf("%d tags decode to %v", n, got.Sources)
					}
					if name == names[0] && s == placement.StateAlive {
						tagsFit = n
					}
				} else if got.SourceDigest != placement.SourceDigestOf(ids(tags)) {
					t.Fatalf("%d tags: digest %d, want %d", n, got.SourceDigest, placement.SourceDigestOf(ids(tags)))
				}
			}
		}
	}
	t.Logf("with a %d-byte name, %d tags fit in full", longest, tagsFit)
	// A short config fits many more: about 40.
	small := Config{Name: "node-1", DebugAddr: "127.0.0.1:7070", Version: "v1.0.0", Capacity: 1}
	fit := 0
	for n := 1; n < 100; n++ {
		if newMeta(small, placement.StateAlive, tagsN(n)).Tags == nil {
			break
		}
		fit = n
	}
	if fit < 35 {
		t.Errorf("only %d tags fit in a small config's metadata", fit)
	}
	t.Logf("a small config gossips up to %d tags in full", fit)

	// NodeMeta never hands memberlist more than the limit.
	c := base
	c.Name = names[0]
	m := &Membership{cfg: c, local: placement.Member{State: placement.StateLeaving}, sources: tagsN(70)}
	m.encodeLocal()
	if b := (*metaDelegate)(m).NodeMeta(memberlist.MetaMaxSize); len(b) > memberlist.MetaMaxSize {
		t.Errorf("NodeMeta: %d bytes", len(b))
	}
}

// Metadata from a drover that did not gossip sources decodes to Sources
// nil and no digest: "did not say"; nor max_capacity: MaxCapacity 0, left
// out of placement.EffectiveMaxCapacity.
func TestMetadataWithoutSources(t *testing.T) {
	got, err := member(&memberlist.Node{Name: "old", Meta: []byte(`{"n":"old","d":"127.0.0.1:7070","v":"v0.9","c":2,"s":"alive"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := placement.Member{Name: "old", Addr: got.Addr, DebugAddr: "127.0.0.1:7070", Version: "v0.9", Capacity: 2, State: placement.StateAlive}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old metadata decodes to %+v, want %+v", got, want)
	}
	if _, runs, known := got.Source(placement.SourceID("orders"), 1); !runs || known {
		t.Errorf("an old member runs %v known %v, want true false", runs, known)
	}
	if got, err := member(&memberlist.Node{Name: "new", Meta: newMeta(Config{Name: "new", MaxCapacity: 4}, placement.StateAlive, nil).encode()}); err != nil || got.MaxCapacity != 4 {
		t.Errorf("max_capacity 4 decodes to %v (%v)", got.MaxCapacity, err)
	}
	// A newer drover's unknown keys are ignored.
	if _, err := member(&memberlist.Node{Name: "new", Meta: []byte(`{"n":"new","s":"alive","zz":[1,2]}`)}); err != nil {
		t.Errorf("unknown key: %v", err)
	}
	for _, bad := range []string{
		`{"n":"x","s":"alive","t":"AAAA"}`,  // 3 bytes: not whole tags
		`{"n":"x","s":"alive","t":"A*AA"}`,  // not base64
		`{"n":"x","s":"alive","t":7}`,       // not a string
		`{"n":"x","s":"alive","g":"seven"}`, // not a number
	} {
		if _, err := member(&memberlist.Node{Name: "x", Meta: []byte(bad)}); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	// Empty tags: runs no source.
	got, err = member(&memberlist.Node{Name: "x", Meta: []byte(`{"n":"x","s":"alive","t":""}`)})
	if err != nil || got.Sources == nil || len(got.Sources) != 0 {
		t.Errorf("empty tags decode to %v, %v; want an empty, non-nil list", got.Sources, err)
	}
}

func TestSetSourcesAfterLeave(t *testing.T) {
	a, err := Join(t.Context(), withDefaults(t, Config{Name: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSources(t.Context(), tagsN(2)); !errors.Is(err, ErrLeft) {
		t.Errorf("SetSources after Leave = %v, want ErrLeft", err)
	}
}
