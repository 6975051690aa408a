package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// costOf runs f and returns how long it took and how many bytes it
// allocated.
func costOf(f func()) (time.Duration, uint64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&m1)
	return d, m1.TotalAlloc - m0.TotalAlloc
}

// mustRefuse parses y and fails t unless one problem has the path and
// contains want (any path when path is ""), and the parse allocated at most maxAlloc bytes.
func mustRefuse(t *testing.T, y []byte, opts Options, path, want string, maxAlloc uint64) {
	t.Helper()
	var err error
	d, alloc := costOf(func() { _, err = Parse(y, opts) })
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%d bytes accepted (%v), want a problem at %s containing %q", len(y), err, path, want)
	}
	found := false
	for _, fe := range errs {
		found = found || ((fe.Path == path || path == "") && strings.Contains(fe.Msg, want))
	}
	if !found {
		t.Errorf("problems %v, want one at %s containing %q", cut(errs.Error(), 2000), path, want)
	}
	if alloc > maxAlloc {
		t.Errorf("refusing %d bytes allocated %d MB (in %v), want at most %d MB", len(y), alloc>>20, d, maxAlloc>>20)
	}
	t.Logf("refused %d bytes in %v, %d KB allocated: %s", len(y), d, alloc>>10, cut(errs.Error(), 200))
}

// refuses is mustRefuse as a subtest called name.
func refuses(t *testing.T, name string, y []byte, opts Options, path, want string, maxAlloc uint64) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Helper()
		mustRefuse(t, y, opts, path, want, maxAlloc)
	})
}

// billionLaughs is 9 levels of lists of 9 aliases of the level below: 9^8
// strings when expanded, about 400 bytes. use is the line that uses it.
func billionLaughs(use string) []byte {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for _, n := range "bcdefgh" {
		fmt.Fprintf(&b, "%c: &%c [%s]\n", n, n, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
		prev = string(n)
	}
	b.WriteString(use + "\n")
	return []byte(b.String())
}

// Issue 10, item 4: an alias bomb used as a mapping key took 18 s and 1 GB
// (the decoder turns a key into text with fmt.Sprint); now any alias key
// is refused before decoding, as are keys that are not strings.
func TestAliasesAndNonStringKeysRefused(t *testing.T) {
	opts := testOptions(nil, nil)
	mustRefuse(t, billionLaughs("? *h\n: x"), opts, "(root)", "a mapping key must be a plain string, not an alias (*h): aliases may not be keys", 8<<20)
	mustRefuse(t, billionLaughs("*h : x"), opts, "(root)", "not an alias (*h)", 8<<20)
	for _, c := range []struct{ yaml, path, want string }{
		{"node: {1: x}\n", "node", "not the number 1"},
		{"node: {true: x}\n", "node", "not a boolean"},
		{"node: {~: x}\n", "node", "not null"},
		{"node: {? [a, b] : x}\n", "(root)", "invalid YAML"}, // the parser refuses these itself
		{"node: {? {a: b} : x}\n", "(root)", "invalid YAML"},
		{"node: {!!str x: y}\n", "node", "not a tagged value"},
		{"sources:\n  - name: a\n    kafka: {3.5: x}\n", "sources[0].kafka", "not the number 3.5"},
	} {
		mustRefuse(t, []byte(c.yaml), opts, c.path, c.want, 8<<20)
	}
	// Aliases as values, and merge keys, still work.
	c, err := Parse([]byte(`
x-kafka: &k {brokers: ["127.0.0.1:9092"], topic: t}
x-common: &common {type: kafka, batch_size: 7}
sources:
  - {<<: *common, name: a, kafka: *k}
  - {<<: *common, name: b, kafka: *k}
`), opts)
	if err == nil || strings.Count(err.Error(), "unknown field") != 2 || strings.Contains(err.Error(), "sources[") {
		t.Fatalf("aliases as values: %v %v", c, err)
	}
}

// The nodes aliases stand for are counted as if expanded: a bomb used as
// a value is cheap for the decoder (it shares the anchor's value), but
// merge keys re-read their anchor, and the reader walks what it is given.
func TestAliasExpansionCapped(t *testing.T) {
	opts := testOptions(nil, nil)
	refuses(t, "billion laughs as a value", billionLaughs("sources: *h"), opts, "", fmt.Sprintf("aliases stand for more than %d values", MaxAliasNodes), 8<<20)
	// one anchor of 1,000 values used by 101 aliases
	big := "sources:\n  - name: a\n    type: kafka\n    kafka: {brokers: &b [" + strings.Repeat("'h:1', ", 999) + "'h:1'], topic: t}\n"
	for i := 0; i < 101; i++ {
		big += fmt.Sprintf("  - {name: a%d, type: kafka, kafka: {brokers: *b, topic: t}}\n", i)
	}
	refuses(t, "one anchor many aliases", []byte(big), opts, "sources[100].kafka.brokers", "aliases stand for more than", 64<<20)
	// merge keys doubling at each level
	var b strings.Builder
	b.WriteString("m0: &m0 {a: 1, b: 2}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [*m%d, *m%d], k%d: 1}\n", i, i, i-1, i-1, i)
	}
	refuses(t, "merge keys doubling", []byte(b.String()), opts, "", "aliases stand for more than", 64<<20)
	// a few aliases are fine
	if _, errs := parse(t, "sources: [{name: a, type: kafka, kafka: &a {brokers: ['h:1'], topic: t}}, {name: b, type: kafka, kafka: *a}]\n"); errs != nil {
		t.Errorf("aliases: %v", errs)
	}
}

// goccy's parser recurses once per sibling key of a block mapping (40,000
// keys: 34 s, 6 GB) and its cost grows with the square of the depth: the
// shape is checked on the tokens, before it parses.
func TestShapeLimits(t *testing.T) {
	opts := testOptions(nil, nil)
	var keys strings.Builder
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&keys, "k%d: 1\n", i)
	}
	refuses(t, "block keys", []byte(keys.String()), opts, "(root)", fmt.Sprintf("line %d: a mapping has more than %d keys", MaxMappingKeys+1, MaxMappingKeys), 64<<20)
	var flowKeys strings.Builder
	flowKeys.WriteString("node: {")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&flowKeys, "k%d: 1, ", i)
	}
	flowKeys.WriteString("}\n")
	refuses(t, "flow keys", []byte(flowKeys.String()), opts, "(root)", "a mapping has more than", 16<<20)

	const n = 10000
	refuses(t, "flow lists deep", []byte(strings.Repeat("[", n)+strings.Repeat("]", n)), opts, "(root)", fmt.Sprintf("line 1: nested more than %d levels deep", MaxDepth), 64<<20)
	refuses(t, "flow mappings deep", []byte(strings.Repeat("{a: ", n)), opts, "(root)", "nested more than", 64<<20)
	refuses(t, "block lists deep", []byte(strings.Repeat("- ", n)+"x"), opts, "(root)", "nested more than", 64<<20)
	var indent strings.Builder
	for i := 0; i < 1000; i++ {
		indent.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	refuses(t, "block mappings deep", []byte(indent.String()), opts, "(root)", "nested more than", 64<<20)
	// tokens are counted on the bytes before scanning, and again after
	refuses(t, "tokens", []byte("sources: ["+strings.Repeat("1,", MaxTokens)+"1]\n"), opts, "(root)", fmt.Sprintf("more than %d: too big", MaxTokens), 1<<20)
	refuses(t, "block list entries", []byte(strings.Repeat("-\n", MaxTokens*3/4)), opts, "(root)", fmt.Sprintf("line %d: a list has more than %d entries", MaxListEntries+1, MaxListEntries), 128<<20)

	// A real config's shape is far from the limits.
	deep := "sources:\n  - name: a\n    type: kafka\n    kafka:\n      brokers: [\"h:1\"]\n      topic: t\n      tls:\n        enabled: true\n"
	if _, errs := parse(t, deep); errs != nil {
		t.Errorf("a config nested as deep as the schema goes: %v", errs)
	}
}

// Issue 10, item 4: 400,000 sources were accepted.
func TestTooManySources(t *testing.T) {
	var b strings.Builder
	b.WriteString("sources:\n")
	for i := 0; i <= MaxSources; i++ {
		fmt.Fprintf(&b, "  - {name: s%d, type: memory, memory: {}}\n", i)
	}
	refuses(t, "too many", []byte(b.String()), testOptions(nil, nil), "sources", fmt.Sprintf("%d sources: at most %d on one node", MaxSources+1, MaxSources), 256<<20)
	// MaxSources are fine
	y := strings.Replace(b.String(), fmt.Sprintf("  - {name: s%d, type: memory, memory: {}}\n", MaxSources), "", 1)
	c, err := Parse([]byte(y), testOptions(nil, nil))
	if err != nil || len(c.Sources) != MaxSources {
		t.Fatalf("%d sources: %v", MaxSources, err)
	}
}

// Issue 10, item 4: `--config /dev/zero` and ${file:/dev/zero} ran out of
// memory, and 50 MB configs were accepted.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	// 8 MiB: reading it whole would allocate more than Load may
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 8*MaxConfigBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{big, "/dev/zero"} {
		t.Run("Load "+filepath.Base(p), func(t *testing.T) {
			var err error
			d, alloc := costOf(func() { _, err = Load(p) })
			if err == nil || !strings.Contains(err.Error(), "(file): "+p+" is larger than 1048576 bytes (1 MiB)") {
				t.Errorf("Load(%s): %v", p, err)
			}
			if alloc > 16<<20 {
				t.Errorf("Load(%s) allocated %d MB in %v", p, alloc>>20, d)
			}
		})
	}
	refuses(t, "Parse over 1 MiB", make([]byte, MaxConfigBytes+1), Options{}, "(root)", "the config is 1048577 bytes: at most 1048576 (1 MiB) are read", 1<<20)

	// ${file:} through the default reader: the real files
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte(strings.Repeat("k", MaxFileRefBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large")
	if err := os.WriteFile(large, []byte(strings.Repeat("k", MaxFileRefBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const rest = "\nsources: [{name: a, type: memory, memory: {}}]\n"
	for _, c := range []struct{ file, want string }{
		{"/dev/zero", "node.debug_token: cannot read file /dev/zero (referenced as ${file:/dev/zero}): /dev/zero is not a regular file"},
		{large, "the file is larger than 65536 bytes"},
		{fifo, fifo + " is not a regular file"}, // a FIFO nobody writes to would block the read
	} {
		t.Run("${file:"+filepath.Base(c.file)+"}", func(t *testing.T) {
			var err error
			d, alloc := costOf(func() {
				_, err = Parse([]byte("node: {name: n, debug_token: '${file:"+c.file+"}'}"+rest), Options{})
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("${file:%s}: %v, want %q", c.file, err, c.want)
			}
			if alloc > 4<<20 {
				t.Errorf("${file:%s} allocated %d MB in %v", c.file, alloc>>20, d)
			}
		})
	}
	c, err := Parse([]byte("node: {name: n, debug_token: '${file:"+small+"}'}"+rest), Options{})
	if err != nil || len(c.Node.DebugToken.Reveal()) != MaxFileRefBytes {
		t.Errorf("a file of exactly %d bytes: %v", MaxFileRefBytes, err)
	}
	// what a replaced ReadFile returns is held to the limit too
	refuses(t, "replaced ReadFile over 64 KiB", []byte("node: {name: n, debug_token: '${file:/big}'}"+rest),
		testOptions(nil, map[string]string{"/big": strings.Repeat("x", MaxFileRefBytes+1)}), "node.debug_token", "larger than 65536 bytes", 4<<20)
	// and all references together to MaxRefBytes: an anchor is expanded
	// once per alias
	var y strings.Builder
	y.WriteString("x: &t '${file:/k}'\ncluster: {join: [")
	for i := 0; i < 40; i++ {
		y.WriteString("*t, ")
	}
	y.WriteString("]}" + rest)
	refuses(t, "references in all", []byte(y.String()), testOptions(nil, map[string]string{"/k": strings.Repeat("h", 60<<10)}), "cluster.join[17]",
		"references substitute more than 1048576 bytes (1 MiB) in all", 64<<20)
}

// Issue 10, item 9: a UTF-8 byte order mark became part of the first key.
func TestByteOrderMarks(t *testing.T) {
	if _, errs := parse(t, "\ufeffnode: {name: n}\nsources: [{name: a, type: memory, memory: {}}]\n"); errs != nil {
		t.Errorf("UTF-8 BOM: %v", errs)
	}
	mustRefuse(t, []byte("\xff\xfen\x00o\x00"), Options{}, "(root)", "UTF-16", 1<<20)
}

// At most MaxErrors problems are kept, and a last one counts the rest.
func TestErrorsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("sources:\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "  - {name: 'bad name %d', type: memory, memory: {}}\n", i)
	}
	_, errs := parse(t, b.String())
	if len(errs) != MaxErrors+1 || errs[MaxErrors].Path != "(root)" || errs[MaxErrors].Msg != "and 500 more problems" {
		t.Errorf("%d problems, last %v", len(errs), errs[len(errs)-1])
	}
}

// Issue 10, item 3: a ${file:} reference in a non-secret field printed the
// whole file in its problem. A value that came through a reference is
// described by it, never quoted; a long value is described by its size.
func TestReferencedValuesNeverQuoted(t *testing.T) {
	const passwd = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
	env := map[string]string{"NAME": "bad name", "BIND": "not-an-address", "DSN": "host=db user=u password=dsn-secret-1 dbname=d",
		"TOPIC": "a topic!", "N": "many", "NATS": "nats://tok-secret-2@h:1,http://x"}
	opts := testOptions(env, map[string]string{"/etc/passwd": passwd})
	y := `
node: {name: '${env:NAME}'}
cluster: {bind: '${file:/etc/passwd}'}
store: {url: '${env:DSN}'}
sources:
  - name: a
    type: kafka
    kafka: {brokers: ['h:1'], topic: '${env:TOPIC}'}
    records: {table: '${file:/etc/passwd}', schema: '${file:/etc/passwd}'}
    batch_size: '${env:N}'
  - name: b
    type: nats
    nats: {url: '${env:NATS}', stream: '${file:/etc/passwd}'}
  - name: c
    type: memory
    memory: {}
    records: {table: '` + strings.Repeat("t", 300) + `'}
`
	_, err := Parse([]byte(y), opts)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"node.name: the value from ${env:NAME} must be letters",
		"cluster.bind: the value from ${file:/etc/passwd} must be host:port",
		"store.url: the value from ${env:DSN}: must start with postgres://",
		"sources[0].kafka.topic: the value from ${env:TOPIC} must be 1 to 249",
		"sources[0].records.table: table name the value from ${file:/etc/passwd}: must match",
		"sources[0].records.schema: schema entry 1 the value from ${file:/etc/passwd}: unknown type the value from ${file:/etc/passwd} (want one of",
		"sources[0].batch_size: must be an integer, not the value from ${env:N}",
		"sources[1].nats.url: entry 2 (the value from ${env:NATS}) must be nats://host:port",
		"sources[1].nats.stream: the value from ${file:/etc/passwd} must not contain",
		"sources[2].records.table: table name a value of 300 bytes: must match",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems lack %q:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"root:x", "daemon", "bad name", "not-an-address", "dsn-secret-1", "host=db", "a topic!", "many", "tok-secret-2", strings.Repeat("t", 101)} {
		if strings.Contains(msg, secret) {
			t.Errorf("problems quote %q:\n%s", secret, msg)
		}
	}
	// a short value written in the file is still quoted
	_, errs := parse(t, "node: {name: 'a b'}\nsources: [{name: a, type: memory, memory: {}, batch_size: many}]\n")
	if errs.Error() != "sources[0].batch_size: must be an integer, not \"many\"\n"+
		"node.name: \"a b\" must be letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)" {
		t.Errorf("literal values: %v", errs)
	}
}

// Issue 10, item 3: a literal ?password= in a store URL was accepted
// although literal secrets are refused everywhere else. Every place a
// password can sit in a URL or DSN is refused when written in the file.
func TestLiteralSecretsInURLsRefused(t *testing.T) {
	env := map[string]string{"PW": "pw-secret", "DB": "d", "TOK": "tok"}
	for _, c := range []struct {
		url  string
		path string // "" accepted
	}{
		{"store: {url: 'postgres://u:pw@h/d'}", "store.url"},
		{"store: {url: 'postgresql://u@h/d?sslmode=disable&password=pw'}", "store.url"},
		{"store: {url: 'postgres://u@h/d?sslpassword=pw'}", "store.url"},
		{"store: {url: 'host=h password=pw dbname=d'}", "store.url"},
		{"store: {url: \"host=h password='p w' dbname=d\"}", "store.url"},
		{"store: {url: 'postgres://u:pw@h/${env:DB}'}", "store.url"}, // a reference elsewhere does not make it one
		{"store: {url: 'postgres://u:$${env:PW}@h/d'}", "store.url"}, // $${ is a literal
		{"store: {url: 'postgres://u:${env:PW}@h/d'}", ""},
		{"store: {url: 'postgres://u@h/d?password=${file:/pw}'}", ""},
		{"store: {url: 'postgres://u@h/d?sslmode=require'}", ""},
		{"sources: [{name: a, type: nats, nats: {url: 'nats://tok@h:1', stream: S}}]", "sources[0].nats.url"},
		{"sources: [{name: a, type: nats, nats: {url: 'nats://h:1,nats://u:pw@h:2', stream: S}}]", "sources[0].nats.url"},
		{"sources: [{name: a, type: nats, nats: {url: 'nats://${env:TOK}@h:1', stream: S}}]", ""},
		{"sources: [{name: a, type: nats, nats: {url: 'nats://h:1, nats://h:2', stream: S}}]", ""},
	} {
		y := c.url + "\n"
		if !strings.Contains(y, "sources:") {
			y += src
		}
		_, err := Parse([]byte(y), testOptions(env, map[string]string{"/pw": "pw-secret"}))
		refused := err != nil && strings.Contains(err.Error(), c.path+": the password must come from ${env:NAME} or ${file:PATH}")
		switch {
		case c.path == "" && err != nil:
			t.Errorf("%s: %v", c.url, err)
		case c.path != "" && !refused:
			t.Errorf("%s: %v, want %s refused", c.url, err, c.path)
		case err != nil && strings.Contains(err.Error(), "pw"):
			t.Errorf("%s: the problem quotes the password: %v", c.url, err)
		}
	}
}
