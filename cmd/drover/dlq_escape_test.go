package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/testserver"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
	"github.com/drover-dev/drover/persistence/storetest"
)

// hostile are producer-controlled strings that a terminal acts on, and
// the escape the human output must show instead.
var hostile = []struct {
	name, text, shown string
}{
	{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
	{"window title (OSC 0)", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
	{"clipboard (OSC 52)", "\x1b]52;c;ZWNobyBwd25lZA==\x07", `\x1b]52;c;ZWNobyBwd25lZA==\x07`},
	{"C1 CSI as a rune", "\u009b2J", `\u009b2J`},
	{"carriage return", "safe\rEVIL", `safe\rEVIL`},
	{"backspace and DEL", "ab\x08\x7f", `ab\x08\x7f`},
	{"bidi override", "abc\u202edcba", `abc\u202edcba`},
	{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
}

// seedHostile writes one dead letter whose key, position, reason and
// payload all carry text, and returns the store URL and its id.
func seedHostile(t *testing.T, text string) (string, int64) {
	t.Helper()
	url := "sqlite:" + filepath.Join(t.TempDir(), "d.db")
	ctx := context.Background()
	s, err := stores.Open(ctx, url, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.ApplyPeople(t, s, "n1", "7"+text, persistence.Op{Kind: persistence.OpDeadLetter, Position: "7" + text, MsgKey: "key" + text,
		Payload: []byte("payload " + text + " end"), Reason: "invalid JSON: " + text})
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("seeded: %v %v", dls, err)
	}
	return url, dls[0].ID
}

// terminalControl returns the first rune (or byte that is not UTF-8) of
// out that a terminal would act on: C0 controls but newline and tab, DEL,
// C1 controls, bidirectional embeddings, overrides and isolates.
func terminalControl(out string) (string, bool) {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && n == 1,
			r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return strings.ToValidUTF8(out[max(0, i-10):min(len(out), i+10)], "?"), true
		}
		i += n
	}
	return "", false
}

// Issue 10, item 5: dlq list and show wrote keys, payloads and reasons to
// the terminal as they were.
func TestDLQEscapesTerminalControls(t *testing.T) {
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			url, id := seedHostile(t, h.text)
			for _, args := range [][]string{
				{"dlq", "list", "--store", url},
				{"dlq", "show", "--store", url, itoa(id)},
				{"dlq", "list", "--store", url, "--json"},
				{"dlq", "show", "--store", url, itoa(id), "--json"},
			} {
				code, out, errs := runCLI(t, args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errs)
				}
				if at, bad := terminalControl(out); bad {
					t.Errorf("%v: a terminal control reaches the output near %q:\n%q", args, at, out)
				}
				if args[len(args)-1] != "--json" && !strings.Contains(out, h.shown) {
					t.Errorf("%v: the output does not show %s as %s:\n%s", args, h.name, h.shown, out)
				}
			}
			// show's text names every field escaped; --json keeps the exact text
			_, out, _ := runCLI(t, "dlq", "show", "--store", url, itoa(id))
			for _, want := range []string{"key" + h.shown, "7" + h.shown, "invalid JSON: " + h.shown, "payload " + h.shown + " end"} {
				if !strings.Contains(out, want) {
					t.Errorf("show lacks %q:\n%s", want, out)
				}
			}
			_, out, _ = runCLI(t, "dlq", "show", "--store", url, itoa(id), "--json")
			var d deadLetterJSON
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("show --json: %v\n%s", err, out)
			}
			if d.MsgKey != "key"+h.text || d.Reason != "invalid JSON: "+h.text || d.Payload == nil || *d.Payload != "payload "+h.text+" end" {
				t.Errorf("show --json does not round-trip: %+v", d)
			}
		})
	}
}

// A key that is not UTF-8 (a raw 8-bit CSI byte) is escaped byte by byte;
// a payload that is not UTF-8 is a hex dump.
func TestDLQEscapesBytesThatAreNotUTF8(t *testing.T) {
	url, id := seedHostile(t, "\x9b2J")
	for _, args := range [][]string{{"dlq", "list", "--store", url}, {"dlq", "show", "--store", url, itoa(id)}} {
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errs)
		}
		if at, bad := terminalControl(out); bad {
			t.Errorf("%v: near %q:\n%q", args, at, out)
		}
		if !strings.Contains(out, `\x9b2J`) {
			t.Errorf("%v: no \\x9b in\n%s", args, out)
		}
	}
}

// show --raw writes the payload's bytes exactly, to a pipe or a file, and
// refuses a terminal.
func TestDLQShowRaw(t *testing.T) {
	text := "\x1b]52;c;ZWNobyBwd25lZA==\x07\u202e"
	url, id := seedHostile(t, text)
	code, out, errs := runCLI(t, "dlq", "show", "--store", url, itoa(id), "--raw")
	if code != 0 || out != "payload "+text+" end" {
		t.Fatalf("--raw: exit %d, %q (%s)", code, out, errs)
	}
	if code, _, errs := runCLI(t, "dlq", "show", "--store", url, itoa(id), "--raw", "--json"); code != 2 || !strings.Contains(errs, "choose one") {
		t.Errorf("--raw --json: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "dlq", "list", "--store", url, "--raw"); code != 2 || !strings.Contains(errs, "unknown flag: --raw") {
		t.Errorf("list --raw: exit %d %s", code, errs)
	}

	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		testserver.SkipOrFail(t, "no terminal to test with: open /dev/ptmx: "+err.Error())
	}
	defer tty.Close()
	if !isTerminal(tty) {
		t.Fatal("isTerminal(/dev/ptmx) = false")
	}
	var errb bytes.Buffer
	if code := run([]string{"dlq", "show", "--store", url, itoa(id), "--raw"}, tty, &errb); code != 2 ||
		!strings.Contains(errb.String(), "stdout is a terminal") {
		t.Errorf("--raw to a terminal: exit %d, stderr %q", code, errb.String())
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is taken for a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "payload.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a file is taken for a terminal")
	}
}

// Issue 10, item 9: `drover dlq list --store sqlite:/typo.db` created and
// migrated a new database; a bad --store URL exited 1, not 2.
func TestDLQRefusesAMissingStoreAndABadURL(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	cfg := writeConfig(t, `node: {name: n1}
store: {url: "sqlite:`+typo+`"}
sources:
  - {name: people, type: memory, memory: {partitions: 1}, records: {table: people, key: id}}
`)
	for _, args := range [][]string{
		{"dlq", "list", "--store", "sqlite:" + typo},
		{"dlq", "show", "--store", "sqlite:" + typo, "1"},
		{"dlq", "resolve", "--store", "sqlite:" + typo, "1"},
		{"dlq", "replay", "--config", cfg, "1"},
		{"dlq", "list", "--config", cfg},
	} {
		code, _, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, typo) || !strings.Contains(errs, "no such file") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming the missing file", args, code, errs)
		}
		if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%v created %s", args, typo)
		}
	}
	for _, url := range []string{"mysql://h/db", "sqlite:", "sqlite://host/x.db", "postgres:nohost", "nocolon"} {
		if code, _, errs := runCLI(t, "dlq", "list", "--store", url); code != 2 || errs == "" {
			t.Errorf("--store %q: exit %d, stderr %q; want 2", url, code, errs)
		}
	}
}

// list and show open the store read-only: a store of an older schema is
// refused, not migrated; resolve (a write) migrates it as a node would.
func TestDLQReadCommandsDoNotMigrate(t *testing.T) {
	url, id := seedHostile(t, "x")
	path := strings.TrimPrefix(url, "sqlite:")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// back to schema version 1: what migrations 2 to 6 added is gone
	for _, q := range []string{`ALTER TABLE drover_leases DROP COLUMN renewed_at`, `DROP TABLE drover_sources`,
		`ALTER TABLE drover_dead_letters DROP COLUMN payload_bytes`, `DROP INDEX drover_leases_owner`,
		`DROP TABLE drover_nodes`, `DROP TABLE drover_controls`, `DROP TABLE drover_control_audit`,
		`ALTER TABLE drover_checkpoints DROP COLUMN stream_id`, `UPDATE drover_schema SET version = 1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	version := func() int {
		var v int
		if err := db.QueryRow(`SELECT version FROM drover_schema`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, args := range [][]string{{"dlq", "list", "--store", url}, {"dlq", "show", "--store", url, itoa(id)}} {
		code, _, errs := runCLI(t, args...)
		if code != 1 || !strings.Contains(errs, "schema version 1") {
			t.Errorf("%v on a version-1 store: exit %d, stderr %q", args, code, errs)
		}
		if v := version(); v != 1 {
			t.Fatalf("%v migrated the store to version %d", args, v)
		}
	}
	if code, out, errs := runCLI(t, "dlq", "resolve", "--store", url, itoa(id)); code != 0 || !strings.Contains(out, "resolved") {
		t.Fatalf("resolve: exit %d %s%s", code, out, errs)
	}
	if v := version(); v < 2 {
		t.Errorf("resolve left version %d", v)
	}
}

// dlq show says when a dead letter's payload was cut, and how long the
// message was.
func TestDLQShowSaysThePayloadWasCut(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "d.db")
	ctx := context.Background()
	s, err := stores.Open(ctx, url, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "people/0", Owner: "n1", TTL: time.Minute, Live: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, &persistence.Batch{Source: "people", Unit: "people/0", Lease: l, Table: "people", Checkpoint: "3",
		Ops: []persistence.Op{{Kind: persistence.OpDeadLetter, Position: "3", Payload: []byte("0123456789"), PayloadBytes: 5000,
			Reason: "message of 5000 bytes exceeds max_message_bytes 4096"}}}); err != nil {
		t.Fatal(err)
	}
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{})
	s.Close()
	if err != nil || len(dls) != 1 {
		t.Fatalf("seeded: %v %v", dls, err)
	}
	code, out, errs := runCLI(t, "dlq", "show", "--store", url, itoa(dls[0].ID))
	if code != 0 || !strings.Contains(out, "payload (10 of 5000 bytes: cut at dead_letter_max_bytes)") {
		t.Fatalf("exit %d, out %q, err %q", code, out, errs)
	}
}
