package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 10, item 3: `drover check` and `drover node` printed a DSN-form
// store URL given through ${env:} unmasked, a NATS token given as the
// URL's user name too, and a ${file:} read into a non-secret field whole
// in its error; `drover dlq --store` echoed the raw URL. Each form goes
// through ${env:} (and, where the file may hold it, literally) and every
// output is searched for its secret. A running node's logs, tree and
// metrics are searched by cluster/node's TestSecretsNeverPrintE2E.
func TestSecretsNeverPrintCLI(t *testing.T) {
	const memSource = "sources: [{name: m, type: memory, memory: {}, records: {key: id}}]\n"
	natsSource := func(url string) string {
		return "sources: [{name: n, type: nats, nats: {url: '" + url + "', stream: S}, records: {key: id}}]\n"
	}
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("file-secret-9\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		env     string // DROVER_T_VALUE
		config  string // ${env:DROVER_T_VALUE} is the value
		secret  string
		code    int    // of check
		printed string // what check prints instead, "" when it exits 2
	}{
		{"postgres userinfo", "postgres://drover:pg-secret-1@127.0.0.1:1/d", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg-secret-1", 0, "store postgres://drover:xxxxx@127.0.0.1:1/d"},
		{"postgresql ?password=", "postgresql://drover@127.0.0.1:1/d?password=pg-secret-2&sslmode=disable", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg-secret-2", 0, "store postgresql://drover@127.0.0.1:1/d?password=xxxxx&sslmode=disable"},
		{"DSN", "host=127.0.0.1 port=1 user=drover password=pg-secret-3 dbname=d", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg-secret-3", 2, ""},
		{"DSN quoted", "host=127.0.0.1 password='pg secret 4' dbname=d", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg secret 4", 2, ""},
		{"no scheme", "//drover:pg-secret-5@127.0.0.1/d", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg-secret-5", 2, ""},
		{"NATS user:password", "nats://u:nats-secret-6@127.0.0.1:1", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-6", 0, ""},
		// pgx ends the user info at the first '@' and printed the rest of
		// the password as the host: refused before anything connects
		{"postgres password with @", "postgres://drover:pg-secret-15a@pg-secret-15b@127.0.0.1:1/d", "store: {url: '${env:DROVER_T_VALUE}'}\n" + memSource, "pg-secret-15", 2, ""},
		{"NATS password with @", "nats://u:nats-secret-16a@nats-secret-16b@127.0.0.1:1", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-16", 2, ""},
		{"NATS token", "nats://nats-secret-7@127.0.0.1:1", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-7", 0, ""},
		{"NATS list", "nats://127.0.0.1:1,nats://u:nats-secret-8@127.0.0.1:2,nats://u:nats-secret-8@127.0.0.1:3", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-8", 0, ""},
		// a token in one entry and a user in another: the node would refuse
		// it, so check does (exit 2), without printing either
		{"NATS list, token and user", "nats://u:nats-secret-8c@127.0.0.1:2,nats://nats-secret-8d@127.0.0.1:3", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-8", 2, ""},
		{"NATS list, one bad", "nats://127.0.0.1:1,http://nats-secret-8b@127.0.0.1:2", natsSource("${env:DROVER_T_VALUE}"), "nats-secret-8b", 2, ""},
		{"file in a table name", "", "sources: [{name: m, type: memory, memory: {}, records: {table: '${file:" + secretFile + "}'}}]\n", "file-secret-9", 2, ""},
		{"env in a topic", "env-secret-10 x", "sources: [{name: k, type: kafka, kafka: {brokers: ['h:1'], topic: '${env:DROVER_T_VALUE}'}}]\n", "env-secret-10", 2, ""},
		{"literal userinfo", "", "store: {url: 'postgres://drover:pg-secret-11@h/d'}\n" + memSource, "pg-secret-11", 2, ""},
		{"literal ?password=", "", "store: {url: 'postgres://drover@h/d?password=pg-secret-12'}\n" + memSource, "pg-secret-12", 2, ""},
		{"literal DSN", "", "store: {url: 'host=h password=pg-secret-13'}\n" + memSource, "pg-secret-13", 2, ""},
		{"literal NATS token", "", natsSource("nats://nats-secret-14@h:1"), "nats-secret-14", 2, ""},
		{"schema registry password", "sr-secret-17", "sources: [{name: k, type: kafka, kafka: {brokers: ['h:1'], topic: t}, decode: {format: avro, registry: {url: 'http://sr:8081', username: u, password: '${env:DROVER_T_VALUE}'}}}]\n", "sr-secret-17", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DROVER_T_VALUE", c.env)
			p := writeConfig(t, "node: {name: n1, debug_addr: '127.0.0.1:0'}\ncluster: {bind: '127.0.0.1:0'}\n"+c.config)
			code, out, errs := runCLI(t, "check", "--config", p)
			if code != c.code {
				t.Errorf("check: exit %d, want %d: %s%s", code, c.code, out, errs)
			}
			if !strings.Contains(out, c.printed) {
				t.Errorf("check prints %q, want %q", out, c.printed)
			}
			if c.code == 2 && !strings.Contains(errs, "store.url") && !strings.Contains(errs, ".nats.url") && !strings.Contains(errs, "the value from ${") {
				t.Errorf("check does not name the field or say where the value came from: %s", errs)
			}
			if strings.Contains(c.name, "with @") && !strings.Contains(errs, "percent-encode each '@'") {
				t.Errorf("check does not say to percent-encode the '@': %s", errs)
			}
			outputs := map[string]string{"check": out + errs}
			if c.env != "" && strings.Contains(c.config, "store:") {
				// a store URL given to dlq
				code, o, e := runCLI(t, "dlq", "list", "--store", c.env)
				if c.code == 2 && code != 2 {
					t.Errorf("dlq list --store: exit %d, want 2 (bad usage)", code)
				}
				outputs["dlq --store"] = o + e
			}
			if c.code == 0 && strings.Contains(c.config, "store:") {
				// the node starts, and fails on the store nobody serves
				// (a broker nobody serves is retried: the node stays up)
				code, o, e := runCLI(t, "node", "--config", p)
				if code != 1 {
					t.Errorf("node: exit %d, want 1: %s%s", code, o, e)
				}
				outputs["node"] = o + e
			}
			for what, text := range outputs {
				if strings.Contains(text, c.secret) || (c.name == "file in a table name" && strings.Contains(text, "second line")) {
					t.Errorf("%s shows the secret %q:\n%s", what, c.secret, text)
				}
			}
		})
	}
}

// Issue 10, item 4: each input limit is an exit 2 naming what was too big.
func TestCheckRefusesHugeInputs(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 1<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config []string // --config, or the config's text
		want   string
	}{
		{[]string{"/dev/zero"}, "/dev/zero is larger than 1048576 bytes (1 MiB), the most a config may be"},
		{[]string{big}, "is larger than 1048576 bytes (1 MiB)"},
		{[]string{"", "node: {name: n, debug_token: '${file:/dev/zero}'}\nsources: [{name: m, type: memory, memory: {}}]\n"}, "node.debug_token: cannot read file /dev/zero (referenced as ${file:/dev/zero}): /dev/zero is not a regular file"},
		{[]string{"", "sources:\n" + strings.Repeat("  - {name: m, type: memory, memory: {}}\n", 1001)}, "sources: 1001 sources: at most 1000 on one node"},
		{[]string{"", "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n? *b\n: x\n"}, "(root): a mapping key must be a plain string, not an alias (*b)"},
	} {
		p := c.config[0]
		if p == "" {
			p = writeConfig(t, c.config[1])
		}
		code, out, errs := runCLI(t, "check", "--config", p)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("check %.40q: exit %d, want 2 and %q: %s%s", c.config, code, c.want, out, errs)
		}
	}
}
