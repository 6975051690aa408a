package deploy

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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

func TestManifestsRunAHeadlessStatefulSetWithSecretsAndReadiness(t *testing.T) {
	k := kubeManifests(t)
	svc, sts, cm := k.svc, k.sts, k.cm
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Error("the Service is not headless")
	}
	if sts.Spec.ServiceName != svc.Name {
		t.Error("the StatefulSet does not use the headless Service")
	}
	pod := sts.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pods may run as root")
	}
	if len(pod.Containers) == 0 {
		t.Fatal("the pod has no container")
	}
	c := pod.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Error("readiness is not /readyz")
	}
	secretEnv := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretEnv[e.Name] = e.ValueFrom.SecretKeyRef.Name
		}
	}
	if secretEnv["DROVER_DEBUG_TOKEN"] == "" {
		t.Error("the debug token does not come from a Secret")
	}
	gossipFromSecret := false
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "" && v.Name == "gossip-key" {
			gossipFromSecret = true
		}
	}
	if !gossipFromSecret {
		t.Error("the gossip key does not come from a Secret")
	}
	// no mount inside another: a runtime may not create a mount point in a
	// read-only volume (the ConfigMap)
	for _, a := range c.VolumeMounts {
		for _, b := range c.VolumeMounts {
			if a.MountPath != b.MountPath && strings.HasPrefix(b.MountPath, a.MountPath+"/") {
				t.Errorf("volume mount %s is inside mount %s", b.MountPath, a.MountPath)
			}
		}
	}

	// the embedded configuration is valid for the real parser, and takes
	// its secrets only through ${env:} and ${file:}
	text, ok := cm.Data["drover.yaml"]
	if !ok {
		t.Fatal("the ConfigMap holds no drover.yaml")
	}
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
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas < 2 {
		t.Fatalf("replicas %v: want a cluster", sts.Spec.Replicas)
	}
	var want []string
	for i := range *sts.Spec.Replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s:7946", sts.Name, i, svc.Name))
	}
	if !slices.Equal(cfg.Cluster.Join, want) {
		t.Errorf("cluster.join = %v, want every pod: %v", cfg.Cluster.Join, want)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("drover check warns about the ConfigMap's config: %v", w)
	}
}
