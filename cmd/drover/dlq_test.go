package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
	"github.com/drover-dev/drover/persistence/storetest"
)

// seedDeadLetters writes two dead letters of source "people" (unit
// people/0) into a fresh SQLite store: an oversize message and junk.
func seedDeadLetters(t *testing.T) (url string) {
	t.Helper()
	url = "sqlite:" + filepath.Join(t.TempDir(), "d.db")
	ctx := context.Background()
	s, err := stores.Open(ctx, url, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := `{"id":"big","bio":"` + strings.Repeat(".", 100) + `"}`
	storetest.ApplyPeople(t, s, "node-1", "2",
		persistence.Op{Kind: persistence.OpDeadLetter, Position: "1", Payload: []byte(big), Reason: "message of 122 bytes exceeds max_message_bytes 64"},
		persistence.Op{Kind: persistence.OpDeadLetter, Position: "2", Payload: []byte("junk"), Reason: "invalid JSON"})
	return url
}

func TestDLQListShowReplayResolve(t *testing.T) {
	url := seedDeadLetters(t)
	code, out, errs := runCLI(t, "dlq", "list", "--store", url)
	if code != 0 || !strings.Contains(out, "people/0") || strings.Count(out, "pending") != 2 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "dlq", "list", "--store", url, "--json")
	var listed []deadLetterJSON
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 {
		t.Fatalf("list --json: exit %d %q", code, out)
	}
	bigID, junkID := listed[0].ID, listed[1].ID
	if listed[0].Position != "1" {
		bigID, junkID = junkID, bigID
	}
	code, out, _ = runCLI(t, "dlq", "show", "--store", url, itoa(bigID))
	if code != 0 || !strings.Contains(out, `"id":"big"`) || !strings.Contains(out, "exceeds max_message_bytes") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}

	// the config now allows bigger messages: replay applies it
	cfg := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(cfg, []byte(`node: {name: n1}
store: {url: "`+url+`"}
sources:
  - name: people
    type: memory
    memory: {partitions: 1}
    records: {table: people, key: id}
    max_message_bytes: 4096
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "dlq", "replay", "--config", cfg, itoa(bigID), itoa(junkID))
	if code != 1 || !strings.Contains(out, itoa(bigID)+": replayed") || !strings.Contains(out, itoa(junkID)+": still cannot be applied") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	s, err := stores.Open(context.Background(), url, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, _ := s.Records(context.Background(), "people", "", 0)
	if len(recs) != 1 || recs[0].Key != "big" {
		t.Fatalf("people table after replay: %+v", recs)
	}
	d, _ := s.DeadLetter(context.Background(), junkID)
	if d.Status != persistence.DeadLetterPending || d.Attempts != 2 {
		t.Fatalf("junk after replay: %+v", d)
	}

	if code, out, _ = runCLI(t, "dlq", "resolve", "--store", url, itoa(junkID)); code != 0 || !strings.Contains(out, "resolved") {
		t.Fatalf("resolve: exit %d %s", code, out)
	}
	code, out, _ = runCLI(t, "dlq", "list", "--store", url)
	if code != 0 || !strings.Contains(out, "no dead letters") {
		t.Fatalf("nothing should be pending: %s", out)
	}
	code, out, _ = runCLI(t, "dlq", "list", "--store", url, "--status", "")
	if code != 0 || !strings.Contains(out, "replayed") || !strings.Contains(out, "resolved") {
		t.Fatalf("list of all: %s", out)
	}
}

func TestDLQBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "list"}, // no store
		{"dlq", "show", "--store", "sqlite:/tmp/x.db", "x"}, // not an id
		{"dlq", "list", "--store", "sqlite:/tmp/x.db", "--status", "weird"},
		{"dlq", "replay", "--store", "sqlite:/tmp/x.db", "1"}, // replay needs --config
	} {
		if code, _, errs := runCLI(t, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A dead letter of a wire-format source is replayed with its schema from
// the registry: one dead-lettered while its schema id was not registered
// yet applies once it is.
func TestDLQReplayWireFormat(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "d.db")
	reg := srtest.New(t, "", "")
	id := reg.Add("people-value", srtest.Schema{Type: "JSON", Schema: `{"type":"object","required":["id"]}`})
	body := append([]byte{0, 0, 0, 0, byte(id)}, `{"id":"w1","n":1}`...)
	s, err := stores.Open(context.Background(), url, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.ApplyPeople(t, s, "node-1", "2",
		persistence.Op{Kind: persistence.OpDeadLetter, Position: "1", Payload: body, Reason: "schema id 1: not found in the registry"})
	dls, err := s.DeadLetters(context.Background(), persistence.DeadLetterFilter{Source: "people"})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters: %v %v", dls, err)
	}
	cfg := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(cfg, []byte(`node: {name: n1}
store: {url: "`+url+`"}
sources:
  - name: people
    type: memory
    memory: {partitions: 1}
    records: {table: people, key: id}
    decode: {format: json_schema, registry: {url: "`+reg.URL()+`"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "dlq", "replay", "--config", cfg, itoa(dls[0].ID))
	if code != 0 || !strings.Contains(out, "replayed") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	recs, _ := s.Records(context.Background(), "people", "", 0)
	if len(recs) != 1 || recs[0].Key != "w1" {
		t.Fatalf("people table after replay: %+v", recs)
	}
}
