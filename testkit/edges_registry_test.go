package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"testing"

	"github.com/drover-dev/drover/testkit"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// memRegistry is a schema registry in memory that can be down.
type memRegistry struct {
	mu      sync.Mutex
	down    bool
	schemas map[int]brokers.RegisteredSchema
	asked   map[int]int
}

func (r *memRegistry) SchemaByID(_ context.Context, id int) (brokers.RegisteredSchema, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[id]++
	if r.down {
		return brokers.RegisteredSchema{}, false, errors.New("connection refused (simulated)")
	}
	s, ok := r.schemas[id]
	return s, ok, nil
}

func (r *memRegistry) SchemaByVersion(context.Context, string, int) (brokers.RegisteredSchema, bool, error) {
	return brokers.RegisteredSchema{}, false, nil
}

func (r *memRegistry) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// wireJSON frames a JSON body in the Confluent wire format with schema id.
func wireJSON(id int, body string) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, body...)
}

// 14.2. A registry that cannot be asked is a retry, never a dead letter:
// while it is down the unit retries with its error and nothing is
// applied or dead-lettered; once it is back every message applies, and
// only the messages of an unknown schema id are dead letters.
func edgeRegistryDown(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 61, Nodes: 1})
	reg := &memRegistry{schemas: map[int]brokers.RegisteredSchema{1: {Type: "JSON", Text: `{"type":"object","required":["id"]}`}}, asked: map[int]int{}}
	reg.setDown(true)
	must(c.AddStream(actors.SourceSpec{Name: "w", KeyField: "id", BatchSize: 20, Format: decode.FormatJSONSchema,
		Registry: decode.NewRegistryFrom("mem", reg, 0)}, 1))
	var msgs []brokers.Message
	bad := map[int]bool{5: true, 17: true, 25: true}
	for i := range 30 {
		id := 1
		if bad[i] {
			id = 9
		}
		msgs = append(msgs, brokers.Message{Key: []byte(fmt.Sprint(i)), Value: wireJSON(id, fmt.Sprintf(`{"id":"k%d","n":%d}`, i, i))})
	}
	must(c.Publish("w", "0", msgs...))
	mustStart(t, c)
	c.Run(5 * time.Second)
	failed := 0
	for _, e := range c.Log("failed") {
		if strings.Contains(e.Detail, "schema registry") {
			failed++
		}
	}
	if failed == 0 {
		return fmt.Errorf("no failure names the schema registry while it is down: %v", c.Log("failed"))
	}
	dls, err := c.Store().DeadLetters(context.Background(), persistence.DeadLetterFilter{Source: "w"})
	if err != nil {
		return err
	}
	if len(dls) != 0 {
		return fmt.Errorf("%d dead letters while the registry is down (first: %s), want none", len(dls), dls[0].Reason)
	}
	reg.setDown(false)
	if err := settle(c); err != nil {
		return err
	}
	if got := records(t, c.Store(), "w"); len(got) != 27 {
		return fmt.Errorf("%d records, want 27", len(got))
	}
	dls, err = c.Store().DeadLetters(context.Background(), persistence.DeadLetterFilter{Source: "w"})
	if err != nil {
		return err
	}
	for _, dl := range dls {
		if dl.Reason != "schema id 9: not found in the registry" {
			return fmt.Errorf("dead letter at %s: %q, want the unknown schema id", dl.Position, dl.Reason)
		}
	}
	if len(dls) != 3 {
		return fmt.Errorf("%d dead letters, want the 3 of the unknown schema id", len(dls))
	}
	return nil
}
