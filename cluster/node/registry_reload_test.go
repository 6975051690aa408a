package node

import (
	"strings"
	"testing"
)

// A reload that rotates a registry's password lets the client of the old
// password go: the node keeps one registry client per registry in use, not
// one per password it ever read.
func TestReloadForgetsUnusedRegistryClients(t *testing.T) {
	const env = "DROVER_TEST_REGISTRY_PASSWORD"
	source := func(table string) string {
		return "{name: wire, type: memory, memory: {partitions: 1}, records: {table: " + table + ", key: id}, " +
			`decode: {format: avro, registry: {url: "http://127.0.0.1:9", username: drover, password: "${env:` + env + `}"}}}`
	}
	addr := freeGossipAddr(t)
	dir := t.TempDir()
	t.Setenv(env, "first-secret")
	n, path := startFromFile(t, controlYAML("n1", addr, addr, dir, source("wire")), &sharedStreams{})
	clients := func() (int, string) {
		n.regMu.Lock()
		defer n.regMu.Unlock()
		for rc := range n.registries {
			return len(n.registries), string(rc.Password)
		}
		return 0, ""
	}
	if c, pw := clients(); c != 1 || pw != "first-secret" {
		t.Fatalf("after the start: %d registry clients (password %q)", c, pw)
	}
	for i, pw := range []string{"second-secret", "third-secret"} {
		t.Setenv(env, pw)
		if _, err := n.Reload(t.Context()); err != nil {
			t.Fatalf("reload %d: %v", i+1, err)
		}
		if c, got := clients(); c != 1 || got != pw {
			t.Fatalf("after reload %d: %d registry clients (one with password %q), want one with %q", i+1, c, got, pw)
		}
	}
	// a reload that fails after opening a client for a new registry keeps
	// none of it: the source that would use it did not start
	writeFile(t, path, controlYAML("n1", addr, addr, dir, source("wire"),
		"{name: other, type: memory, memory: {partitions: 1}, records: {table: other, key: id}, "+
			`decode: {format: avro, registry: {url: "http://127.0.0.1:10", username: drover, password: "${env:`+env+`}"}}}`,
		"{name: bad, type: memory, mode: handler, handler_name: nobody, memory: {partitions: 1}}"))
	if _, err := n.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), `no handler "nobody"`) {
		t.Fatalf("a reload naming an unregistered handler: %v", err)
	}
	if c, pw := clients(); c != 1 || pw != "third-secret" {
		t.Fatalf("after the failed reload: %d registry clients (password %q)", c, pw)
	}
}
