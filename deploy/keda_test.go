package deploy

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/metrics"
)

// The KEDA example scales the shipped StatefulSet with the Prometheus
// scaler on the largest per-source lag_seconds, a series /metrics serves.
func TestKEDAScalesTheStatefulSetOnSourceLagSeconds(t *testing.T) {
	so := keda(t)
	sts := kubeManifests(t).sts
	ref := so.Spec.ScaleTargetRef
	if ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || ref.Name != sts.Name {
		t.Errorf("scaleTargetRef %+v is not the shipped StatefulSet %s", ref, sts.Name)
	}
	lo, hi := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount
	if lo == nil || hi == nil || *lo < 1 || *hi < *lo {
		t.Errorf("replicas %v..%v: want at least one node", lo, hi)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" {
		t.Fatalf("triggers %+v, want one prometheus trigger", so.Spec.Triggers)
	}
	md := so.Spec.Triggers[0].Metadata
	for k := range md {
		switch k {
		case "serverAddress", "query", "threshold", "activationThreshold":
		default:
			t.Errorf("trigger metadata %q: not a field of KEDA's prometheus scaler as the example uses it", k)
		}
	}
	if th, err := strconv.ParseFloat(md["threshold"], 64); err != nil || th <= 0 {
		t.Errorf("threshold %q must be a positive number of seconds", md["threshold"])
	}
	query := md["query"]
	m := regexp.MustCompile(`\b(drover_[a-z_]+)\{source="([^"]+)"\}`).FindStringSubmatch(query)
	if m == nil || m[1] != "drover_source_lag_seconds" {
		t.Fatalf("query %q does not read drover_source_lag_seconds of a source", query)
	}
	if !regexp.MustCompile(`clamp_min\(.*, 0\)`).MatchString(query) {
		t.Errorf("query %q lets -1 (unknown) through", query)
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
