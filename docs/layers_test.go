package docs

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/drover-dev/drover/"

// layerRule is one rule of architecture §15: no package matching from may
// import a package matching to. A pattern ending in "/" matches that folder
// and everything below it.
type layerRule struct {
	from, except, to []string
	why              string
}

var layerRules = []layerRule{
	{from: []string{"internal/"}, except: []string{"internal/workload"},
		to:  []string{"actors/", "brokers/", "persistence/", "cluster/", "testkit/", "cmd/"},
		why: "internal/ is the floor: leaf primitives import nothing above them"},
	{from: []string{"internal/workload"}, to: []string{"actors", "actors/placement", "cluster/", "testkit/", "cmd/"},
		why: "the workload sits below the demo and the testkit, beside the pure decoder"},
	{from: []string{"brokers/", "persistence/"}, except: []string{"brokers/brokertest", "persistence/storetest"},
		to:  []string{"actors/", "cluster/", "testkit/", "cmd/"},
		why: "adapters and stores know nothing of the runtime (their conformance suites, linked only into tests, may drive it)"},
	{from: []string{"actors/"}, to: []string{"cluster/", "testkit/", "cmd/",
		"brokers/kafka", "brokers/kinesis", "brokers/sqs", "brokers/pubsub", "brokers/nats", "brokers/memory",
		"persistence/postgres", "persistence/sqlite", "persistence/memory", "persistence/stores"},
		why: "the runtime sees adapters and stores only through their interfaces"},
	{from: []string{"actors/placement"}, to: []string{"actors", "actors/decode", "actors/quality", "brokers/", "persistence/"},
		why: "placement is pure and imports nothing of drover"},
	{from: []string{"cluster/"}, to: []string{"testkit/", "cmd/"},
		why: "what ships in a node never links the testkit"},
}

// thirdParty are the client libraries only some packages may import
// (architecture §15): no package outside these sees a franz-go type or a
// pgx error.
var thirdParty = []struct {
	prefix string
	only   []string
}{
	{"github.com/twmb/franz-go", []string{"brokers/kafka", "cluster/demo", "cluster/bench"}},
	{"github.com/jackc/pgx", []string{"persistence/postgres/", "persistence/stores", "cluster/bench"}},
}

// matches says whether the module-relative package path p is matched by
// pattern: "x/" is x and everything under it, anything else is exact.
func matches(p, pattern string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/"); ok {
		return p == dir || strings.HasPrefix(p, pattern)
	}
	return p == pattern
}

func matchesAny(p string, patterns []string) bool {
	for _, pat := range patterns {
		if matches(p, pat) {
			return true
		}
	}
	return false
}

// TestLayers checks the import rules of architecture §15 on the non-test
// imports of every package of the module.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			for _, tp := range thirdParty {
				if strings.HasPrefix(imp, tp.prefix) && !matchesAny(pkg, tp.only) {
					t.Errorf("%s imports %s: only %v may (architecture §15)", pkg, imp, tp.only)
				}
			}
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, r := range layerRules {
				if matchesAny(pkg, r.from) && !matchesAny(pkg, r.except) && matchesAny(dep, r.to) {
					t.Errorf("%s imports %s: %s (architecture §15)", pkg, dep, r.why)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("go list named %d packages of the module; want the whole module", checked)
	}
}

func TestLayerPatterns(t *testing.T) {
	for _, c := range []struct {
		p, pattern string
		want       bool
	}{
		{"actors", "actors/", true},
		{"actors/decode", "actors/", true},
		{"actorsx", "actors/", false},
		{"actors/decode", "actors", false},
		{"brokers/kafka", "brokers/kafka", true},
	} {
		if got := matches(c.p, c.pattern); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.p, c.pattern, got, c.want)
		}
	}
}
