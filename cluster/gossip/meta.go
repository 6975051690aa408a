package gossip

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/actors/placement"
)

// nodeMeta is what a node gossips about itself, as JSON with short keys to
// stay well under memberlist.MetaMaxSize (512 bytes). Unknown keys are
// ignored, so later versions may add some; a node from before a key was
// added simply does not send it.
//
// The sources a node runs travel in Tags: 8 bytes per placement.SourceTag
// (ID, then Units, both big-endian), sorted by ID, as one unpadded
// base64url string (about 10.7 characters per tag). Absent means the node
// did not say (Member.Sources nil); present and empty means it runs none.
// When the tags do not fit in the metadata, Tags is absent and Digest is
// placement.SourceDigestOf their IDs instead.
type nodeMeta struct {
	Name      string                `json:"n"`
	DebugAddr string                `json:"d,omitempty"`
	DebugTLS  bool                  `json:"h,omitempty"` // the debug endpoint serves HTTPS
	Version   string                `json:"v,omitempty"`
	Capacity  float64               `json:"c,omitempty"`
	MaxCap    float64               `json:"x,omitempty"` // cluster.max_capacity; absent from a node before it was gossiped
	State     placement.MemberState `json:"s"`
	Tags      *string               `json:"t,omitempty"`
	Digest    uint64                `json:"g,omitempty"`
}

// tagSize is the encoded size of one source tag, before base64.
const tagSize = 8

func (m nodeMeta) encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Unreachable: strings, finite floats (checked by Validate).
		panic(fmt.Sprintf("gossip: encode node metadata: %v", err))
	}
	return b
}

func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) == 0 {
		return m, errors.New("no metadata")
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode metadata: %w", err)
	}
	if m.State == "" {
		return m, errors.New("metadata without a state")
	}
	if m.Tags != nil {
		if _, err := decodeTags(*m.Tags); err != nil {
			return m, err
		}
	}
	return m, nil
}

// newMeta is the metadata of a node configured by c, in state s, running
// the sources tags (nil: not said). The tags go in full when they fit in
// memberlist.MetaMaxSize in either state, so that a change of state never
// changes how the sources are told; otherwise their digest goes.
func newMeta(c Config, s placement.MemberState, tags []placement.SourceTag) nodeMeta {
	m := nodeMeta{Name: c.Name, DebugAddr: c.DebugAddr, DebugTLS: c.DebugTLS, Version: c.Version, Capacity: c.Capacity, MaxCap: c.MaxCapacity, State: s}
	if tags == nil {
		return m
	}
	enc := encodeTags(tags)
	m.Tags = &enc
	longest := m
	longest.State = placement.StateLeaving
	if len(longest.encode()) <= memberlist.MetaMaxSize {
		return m
	}
	m.Tags = nil
	ids := make([]uint32, len(tags))
	for i, t := range tags {
		ids[i] = t.ID
	}
	m.Digest = placement.SourceDigestOf(ids)
	return m
}

// worstWithoutTags is the largest metadata c can gossip when its tags do
// not fit: the longest state and the largest digest. Validate checks that
// it fits.
func worstWithoutTags(c Config) nodeMeta {
	m := newMeta(c, placement.StateLeaving, nil)
	m.Digest = math.MaxUint64
	return m
}

// sortedTags returns a copy of tags sorted by ID (nil stays nil).
func sortedTags(tags []placement.SourceTag) []placement.SourceTag {
	if tags == nil {
		return nil
	}
	out := slices.Clone(tags)
	slices.SortStableFunc(out, func(a, b placement.SourceTag) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

func encodeTags(tags []placement.SourceTag) string {
	buf := make([]byte, 0, len(tags)*tagSize)
	for _, t := range sortedTags(tags) {
		buf = binary.BigEndian.AppendUint32(buf, t.ID)
		buf = binary.BigEndian.AppendUint32(buf, t.Units)
	}
	return base64.RawURLEncoding.EncodeToString(buf)
}

// decodeTags reads encodeTags' output: never nil, sorted by ID.
func decodeTags(s string) ([]placement.SourceTag, error) {
	buf, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("metadata: source tags: %w", err)
	}
	if len(buf)%tagSize != 0 {
		return nil, fmt.Errorf("metadata: source tags: %d bytes, not a multiple of %d", len(buf), tagSize)
	}
	out := make([]placement.SourceTag, 0, len(buf)/tagSize)
	for i := 0; i < len(buf); i += tagSize {
		out = append(out, placement.SourceTag{ID: binary.BigEndian.Uint32(buf[i:]), Units: binary.BigEndian.Uint32(buf[i+4:])})
	}
	return sortedTags(out), nil
}

// sources returns what m says about the node's sources, as
// placement.Member's Sources and SourceDigest. decodeMeta has checked Tags.
func (m nodeMeta) sources() ([]placement.SourceTag, uint64) {
	if m.Tags != nil {
		tags, _ := decodeTags(*m.Tags)
		return tags, 0
	}
	return nil, m.Digest
}

// member turns a memberlist node into a placement.Member. memberlist's name
// wins over the one in the metadata.
func member(n *memberlist.Node) (placement.Member, error) {
	m, err := decodeMeta(n.Meta)
	if err != nil {
		return placement.Member{}, fmt.Errorf("member %s: %w", n.Name, err)
	}
	tags, digest := m.sources()
	return placement.Member{
		Name:         n.Name,
		Addr:         n.Address(),
		DebugAddr:    m.DebugAddr,
		DebugTLS:     m.DebugTLS,
		Version:      m.Version,
		Capacity:     m.Capacity,
		MaxCapacity:  m.MaxCap,
		State:        m.State,
		Sources:      tags,
		SourceDigest: digest,
	}, nil
}
