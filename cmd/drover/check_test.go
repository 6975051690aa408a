package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckNamesEveryBadFieldAndExitsTwo(t *testing.T) {
	p := writeConfig(t, `node: {name: n1}
cluster: {profile: quick}
sources:
  - name: orders
    type: kafka
    kafka: {brokers: ["kafka://h:9092"]}
    batch_size: 0
    surprise: 1
`)
	code, _, errs := runCLI(t, "check", "--config", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{"cluster.profile:", "sources[0].kafka.topic: required", "sources[0].kafka.brokers[0]", "sources[0].batch_size:", "sources[0].surprise:"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// Pub/Sub's rules are checked by check, not first when the node starts:
// the file accepted a subscription ID the adapter refuses, and more
// outstanding messages than one Pull may ask for.
func TestCheckRefusesWhatThePubSubAdapterRefuses(t *testing.T) {
	p := writeConfig(t, `node: {name: n1}
sources:
  - name: events
    type: pubsub
    pubsub: {project: p1, subscription: s1, max_outstanding: 5000}
`)
	code, _, errs := runCLI(t, "check", "--config", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, errs)
	}
	for _, want := range []string{`sources[0].pubsub.subscription: "s1" must be an ID`, "sources[0].pubsub.max_outstanding: must be at most 1000, not 5000"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestCheckAcceptsAGoodConfig(t *testing.T) {
	t.Setenv("DROVER_TEST_STORE", "postgres://drover:s3cret@db:5432/d")
	p := writeConfig(t, `node: {name: n1}
store: {url: "${env:DROVER_TEST_STORE}"}
sources:
  - name: orders
    type: kafka
    kafka: {brokers: ["127.0.0.1:9092"], topic: orders}
    records: {key: id}
`)
	code, out, errs := runCLI(t, "check", "--config", p)
	if code != 0 || !strings.Contains(out, "ok") || strings.Contains(out+errs, "s3cret") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if code, _, _ := runCLI(t, "check"); code != 2 {
		t.Errorf("check without --config: exit %d, want 2", code)
	}
}

// Issue 9, item 6b: a node of a cluster with an empty join list starts a
// cluster of its own when it restarts; check says so, and still exits 0.
func TestCheckWarnsAboutAnEmptyJoinList(t *testing.T) {
	const sources = `
sources:
  - name: orders
    type: kafka
    kafka: {brokers: ["127.0.0.1:9092"], topic: orders}
`
	for _, c := range []struct {
		name, cluster string
		warn          bool
	}{
		{"no cluster section", "", false},
		{"empty join", "cluster: {bind: 127.0.0.1:7946, profile: fast}\n", true},
		{"join lists only this node", "cluster: {bind: 127.0.0.1:7946, join: [127.0.0.1:7946]}\n", true},
		{"every seed", "cluster: {bind: 127.0.0.1:7946, join: [127.0.0.1:7946, 127.0.0.1:7947, 127.0.0.1:7948]}\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, "node: {name: n1}\n"+c.cluster+sources)
			code, out, errs := runCLI(t, "check", "--config", p)
			if code != 0 || !strings.Contains(out, "ok") {
				t.Fatalf("exit %d: %s%s", code, out, errs)
			}
			warned := strings.Contains(errs, "warning: cluster.join:")
			if warned != c.warn {
				t.Fatalf("warned %v, want %v: stderr %q", warned, c.warn, errs)
			}
			if c.warn {
				for _, want := range []string{"forms a cluster of its own", "until the others reach it", "every seed", "on every node"} {
					if !strings.Contains(errs, want) {
						t.Errorf("the warning lacks %q: %s", want, errs)
					}
				}
			}
		})
	}
}
