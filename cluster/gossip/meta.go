package gossip

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/cluster"
)

// nodeMeta is what a node gossips about itself, as JSON with short keys to
// stay well under memberlist.MetaMaxSize (512 bytes). Unknown keys are
// ignored, so later versions may add some.
type nodeMeta struct {
	Name      string              `json:"n"`
	DebugAddr string              `json:"d,omitempty"`
	Version   string              `json:"v,omitempty"`
	Capacity  float64             `json:"c,omitempty"`
	State     cluster.MemberState `json:"s"`
}

func (m nodeMeta) encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Unreachable: strings, a finite float (checked by Validate).
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
	return m, nil
}

// member turns a memberlist node into a cluster.Member. memberlist's name
// wins over the one in the metadata.
func member(n *memberlist.Node) (cluster.Member, error) {
	m, err := decodeMeta(n.Meta)
	if err != nil {
		return cluster.Member{}, fmt.Errorf("member %s: %w", n.Name, err)
	}
	return cluster.Member{
		Name:      n.Name,
		Addr:      n.Address(),
		DebugAddr: m.DebugAddr,
		Version:   m.Version,
		Capacity:  m.Capacity,
		State:     m.State,
	}, nil
}
