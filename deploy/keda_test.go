package deploy

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/metrics"
)

// scaledObject is the part of KEDA's ScaledObject (keda.sh/v1alpha1) the
// example uses; decoding is strict, so a misspelt or unknown field fails.
type scaledObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicaCount int `yaml:"minReplicaCount"`
		MaxReplicaCount int `yaml:"maxReplicaCount"`
		PollingInterval int `yaml:"pollingInterval"`
		CooldownPeriod  int `yaml:"cooldownPeriod"`
		Advanced        struct {
			HorizontalPodAutoscalerConfig struct {
				Behavior struct {
					ScaleDown struct {
						StabilizationWindowSeconds int `yaml:"stabilizationWindowSeconds"`
						Policies                   []struct {
							Type          string `yaml:"type"`
							Value         int    `yaml:"value"`
							PeriodSeconds int    `yaml:"periodSeconds"`
						} `yaml:"policies"`
					} `yaml:"scaleDown"`
				} `yaml:"behavior"`
			} `yaml:"horizontalPodAutoscalerConfig"`
		} `yaml:"advanced"`
		Triggers []struct {
			Type     string `yaml:"type"`
			Metadata struct {
				ServerAddress       string `yaml:"serverAddress"`
				Query               string `yaml:"query"`
				Threshold           string `yaml:"threshold"`
				ActivationThreshold string `yaml:"activationThreshold"`
			} `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

// The KEDA example scales the shipped StatefulSet with the Prometheus
// scaler on the largest per-source lag_seconds, a series /metrics serves.
func TestKEDAScalesTheStatefulSetOnSourceLagSeconds(t *testing.T) {
	b, err := os.ReadFile("keda/scaledobject.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var so scaledObject
	if err := yaml.UnmarshalWithOptions(b, &so, yaml.Strict()); err != nil {
		t.Fatalf("keda/scaledobject.yaml: %v", err)
	}
	if so.APIVersion != "keda.sh/v1alpha1" || so.Kind != "ScaledObject" {
		t.Fatalf("%s %s, want keda.sh/v1alpha1 ScaledObject", so.APIVersion, so.Kind)
	}
	sts := docs(t)["StatefulSet"]
	ref := so.Spec.ScaleTargetRef
	if ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || ref.Name != get(sts, "metadata", "name") {
		t.Errorf("scaleTargetRef %+v is not the shipped StatefulSet %v", ref, get(sts, "metadata", "name"))
	}
	if so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount < so.Spec.MinReplicaCount {
		t.Errorf("replicas %d..%d: want at least one node", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" {
		t.Fatalf("triggers %+v, want one prometheus trigger", so.Spec.Triggers)
	}
	md := so.Spec.Triggers[0].Metadata
	if th, err := strconv.ParseFloat(md.Threshold, 64); err != nil || th <= 0 {
		t.Errorf("threshold %q must be a positive number of seconds", md.Threshold)
	}
	m := regexp.MustCompile(`\b(drover_[a-z_]+)\{source="([^"]+)"\}`).FindStringSubmatch(md.Query)
	if m == nil || m[1] != "drover_source_lag_seconds" {
		t.Fatalf("query %q does not read drover_source_lag_seconds of a source", md.Query)
	}
	if !regexp.MustCompile(`clamp_min\(.*, 0\)`).MatchString(md.Query) {
		t.Errorf("query %q lets -1 (unknown) through", md.Query)
	}
	// the series the query reads is one /metrics serves, labelled alike
	reg := prometheus.NewRegistry()
	metrics.New(reg, "n", metrics.Options{}).Lag(m[2], m[2]+"/0", actors.Lag{Messages: 1, Known: true})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == m[1] && len(mf.GetMetric()) == 1 {
			return
		}
	}
	t.Errorf("/metrics serves no %s", m[1])
}
