package config

import (
	"slices"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	base := `node: {name: n1, debug_token: "${env:T0}"}
cluster: {bind: "127.0.0.1:7946", join: ["127.0.0.1:7946"]}
store: {url: "sqlite:./d.db"}
sources:
  - {name: a, type: memory, memory: {partitions: 1}}
  - {name: b, type: memory, memory: {partitions: 1}, batch_size: 10}
  - {name: c, type: memory, memory: {partitions: 1}}
`
	parse := func(s string) *Config {
		t.Helper()
		c, err := Parse([]byte(s), Options{LookupEnv: func(k string) (string, bool) { return "secret-" + k, true }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse(base)
	for _, c := range []struct {
		name, yaml              string
		added, removed, changed []string
		fields                  []string // fields the error names; nil: no error
	}{
		{name: "same", yaml: base},
		{name: "sources", yaml: strings.Replace(strings.Replace(base, "batch_size: 10", "batch_size: 11", 1),
			"  - {name: c, type: memory, memory: {partitions: 1}}\n", "  - {name: d, type: memory, memory: {partitions: 1}}\n", 1),
			added: []string{"d"}, removed: []string{"c"}, changed: []string{"b"}},
		{name: "node name", yaml: strings.Replace(base, "name: n1", "name: n2", 1), fields: []string{"node.name"}},
		{name: "secret and join", yaml: strings.Replace(strings.Replace(base, `T0`, `T1`, 1), `join: ["127.0.0.1:7946"]`, `join: ["127.0.0.1:7947"]`, 1),
			fields: []string{"node.debug_token", "cluster.join"}},
		{name: "store and a source", yaml: strings.Replace(strings.Replace(base, "./d.db", "./e.db", 1), "batch_size: 10", "batch_size: 11", 1),
			fields: []string{"store.url"}},
	} {
		d, err := Compare(old, parse(c.yaml))
		if c.fields == nil {
			if err != nil || !slices.Equal(d.Added, c.added) || !slices.Equal(d.Removed, c.removed) || !slices.Equal(d.Changed, c.changed) {
				t.Errorf("%s: %+v, %v", c.name, d, err)
			}
			continue
		}
		es, ok := err.(Errors)
		if !ok || len(es) != len(c.fields) || !d.Empty() {
			t.Errorf("%s: %+v, %v; want errors naming %v and an empty diff", c.name, d, err, c.fields)
			continue
		}
		for i, f := range c.fields {
			if es[i].Path != f || strings.Contains(es[i].Msg, "secret-") {
				t.Errorf("%s: error %d is %q: %s, want %s (no value shown)", c.name, i, es[i].Path, es[i].Msg, f)
			}
		}
	}
}
