package deploy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/drover-dev/drover/cluster/config"
)

func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	if !regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 .*go build .*\./cmd/drover`).MatchString(df) {
		t.Error("the binary is not built static (CGO_ENABLED=0 go build ./cmd/drover)")
	}
	stages := strings.Split(df, "\nFROM ")
	final := stages[len(stages)-1]
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Errorf("final stage runs as %v, want a non-root USER", user)
	}
	if !strings.Contains(final, `ENTRYPOINT ["/usr/local/bin/drover"]`) {
		t.Error("entrypoint is not the drover binary")
	}
}

func docs(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile("kubernetes/drover.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, part := range bytes.Split(b, []byte("\n---\n")) {
		var d map[string]any
		if err := yaml.Unmarshal(part, &d); err != nil {
			t.Fatalf("manifest does not parse: %v", err)
		}
		if d == nil {
			continue
		}
		out[d["kind"].(string)] = d
	}
	return out
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func TestManifestsRunAHeadlessStatefulSetWithSecretsAndReadiness(t *testing.T) {
	d := docs(t)
	svc, sts, cm := d["Service"], d["StatefulSet"], d["ConfigMap"]
	if svc == nil || sts == nil || cm == nil {
		t.Fatalf("want a Service, a StatefulSet and a ConfigMap, got %v", d)
	}
	if get(svc, "spec", "clusterIP") != "None" {
		t.Error("the Service is not headless")
	}
	if get(sts, "spec", "serviceName") != get(svc, "metadata", "name") {
		t.Error("the StatefulSet does not use the headless Service")
	}
	pod := get(sts, "spec", "template", "spec")
	if get(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("pods may run as root")
	}
	c := get(pod, "containers").([]any)[0]
	if get(c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Error("readiness is not /readyz")
	}
	secretEnv := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		if ref := get(e, "valueFrom", "secretKeyRef", "name"); ref != nil {
			secretEnv[get(e, "name").(string)] = ref.(string)
		}
	}
	if secretEnv["DROVER_DEBUG_TOKEN"] == "" {
		t.Error("the debug token does not come from a Secret")
	}
	gossipFromSecret := false
	for _, v := range get(pod, "volumes").([]any) {
		if get(v, "secret", "secretName") != nil && get(v, "name") == "gossip-key" {
			gossipFromSecret = true
		}
	}
	if !gossipFromSecret {
		t.Error("the gossip key does not come from a Secret")
	}
	// no mount inside another: a runtime may not create a mount point in a
	// read-only volume (the ConfigMap)
	var paths []string
	for _, m := range get(c, "volumeMounts").([]any) {
		paths = append(paths, get(m, "mountPath").(string))
	}
	for _, a := range paths {
		for _, b := range paths {
			if a != b && strings.HasPrefix(b, a+"/") {
				t.Errorf("volume mount %s is inside mount %s", b, a)
			}
		}
	}

	// the embedded configuration is valid for the real parser, and takes
	// its secrets only through ${env:} and ${file:}
	text := get(cm, "data", "drover.yaml").(string)
	for _, secret := range []string{"debug_token", "secret_key"} {
		if !regexp.MustCompile(secret + `: \$\{(env|file):`).MatchString(text) {
			t.Errorf("%s is not read from ${env:} or ${file:}", secret)
		}
	}
	env := map[string]string{"POD_NAME": "drover-0", "POD_IP": "10.0.0.7", "DROVER_DEBUG_TOKEN": "t0ken",
		"DROVER_STORE_URL": "postgres://drover@postgres:5432/drover"}
	cfg, err := config.Parse([]byte(text), config.Options{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if p == "/etc/drover-gossip/key" {
				return []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))), nil
			}
			return nil, errors.New("no such file")
		},
	})
	if err != nil {
		t.Fatalf("the ConfigMap's drover.yaml is invalid:\n%v", err)
	}
	if cfg.Node.Name != "drover-0" || cfg.Cluster.Advertise != "10.0.0.7:7946" || len(cfg.Cluster.Key()) != 32 {
		t.Errorf("config read as %+v", cfg.Redacted())
	}

	// every pod lists every pod as a seed (issue 9, item 6b: a node
	// restarted with a partial or empty list may form a cluster of its own)
	replicas, _ := get(sts, "spec", "replicas").(uint64)
	if replicas < 2 {
		t.Fatalf("replicas %v: want a cluster", get(sts, "spec", "replicas"))
	}
	var want []string
	for i := range replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s:7946", get(sts, "metadata", "name"), i, get(svc, "metadata", "name")))
	}
	if !slices.Equal(cfg.Cluster.Join, want) {
		t.Errorf("cluster.join = %v, want every pod: %v", cfg.Cluster.Join, want)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("drover check warns about the ConfigMap's config: %v", w)
	}
}
