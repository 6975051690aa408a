package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Every manifest in deploy/ is decoded strictly (an unknown, miscased or
// duplicated field fails) into the type the
// API server decodes it into: k8s.io/api's for Kubernetes' own kinds, and
// for KEDA's ScaledObject (not in k8s.io/api) scaledObject below, which
// mirrors the fields of keda.sh/v1alpha1 the example uses, on
// apimachinery's TypeMeta and ObjectMeta. These are test-only
// dependencies: nothing imports this package.

// scaledObject mirrors KEDA's v1alpha1 ScaledObject (keda/apis/keda/
// v1alpha1: ScaledObjectSpec, ScaleTarget, AdvancedConfig,
// HorizontalPodAutoscalerConfig, ScaleTriggers), as far as the example
// uses it. Its HPA behaviour is autoscaling/v2's type, as in KEDA.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Advanced        *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *hpaBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

type hpaBehavior = autoscalingv2.HorizontalPodAutoscalerBehavior

// manifest is one decoded document of a file in deploy/.
type manifest struct {
	file string
	obj  any // *corev1.Service, *corev1.ConfigMap, *appsv1.StatefulSet, *scaledObject
}

// decoders are the kinds deploy/ may hold, by apiVersion and kind.
var decoders = map[string]func() any{
	"v1 Service":                    func() any { return &corev1.Service{} },
	"v1 ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"apps/v1 StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"keda.sh/v1alpha1 ScaledObject": func() any { return &scaledObject{} },
}

// decodeManifest decodes one YAML document strictly into its type.
func decodeManifest(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	mk, ok := decoders[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q: not a kind this test decodes (add its type)", tm.APIVersion, tm.Kind)
	}
	// as apimachinery's strict YAML serializer does: duplicate keys fail
	// in the YAML, unknown fields (matched case-sensitively, unlike
	// encoding/json) in the JSON
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	obj := mk()
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// yamlDocs splits a file into its documents, leaving out empty ones.
func yamlDocs(b []byte) [][]byte {
	var out [][]byte
	for _, part := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(part))) > 0 {
			out = append(out, part)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// manifests decodes every .yaml and .yml file under deploy/.
func manifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range yamlDocs(b) {
			obj, err := decodeManifest(doc)
			if err != nil {
				return fmt.Errorf("%s, document %d: %w", path, i+1, err)
			}
			out = append(out, manifest{file: path, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kube is the shipped Kubernetes manifest (kubernetes/drover.yaml).
type kube struct {
	svc *corev1.Service
	cm  *corev1.ConfigMap
	sts *appsv1.StatefulSet
}

func kubeManifests(t *testing.T) kube {
	t.Helper()
	var k kube
	for _, m := range manifests(t) {
		if m.file != filepath.Join("kubernetes", "drover.yaml") {
			continue
		}
		switch o := m.obj.(type) {
		case *corev1.Service:
			k.svc = o
		case *corev1.ConfigMap:
			k.cm = o
		case *appsv1.StatefulSet:
			k.sts = o
		}
	}
	if k.svc == nil || k.cm == nil || k.sts == nil {
		t.Fatalf("kubernetes/drover.yaml: want a Service, a ConfigMap and a StatefulSet, got %+v", k)
	}
	return k
}

func keda(t *testing.T) *scaledObject {
	t.Helper()
	for _, m := range manifests(t) {
		if so, ok := m.obj.(*scaledObject); ok && m.file == filepath.Join("keda", "scaledobject.yaml") {
			return so
		}
	}
	t.Fatal("keda/scaledobject.yaml holds no ScaledObject")
	return nil
}

func TestEveryManifestDecodesStrictly(t *testing.T) {
	ms := manifests(t)
	files := map[string]int{}
	for _, m := range ms {
		files[m.file]++
	}
	if files[filepath.Join("kubernetes", "drover.yaml")] != 3 || files[filepath.Join("keda", "scaledobject.yaml")] != 1 {
		t.Errorf("decoded %v: want kubernetes/drover.yaml's 3 documents and keda/scaledobject.yaml's 1", files)
	}
}

// The decoding is strict: a field the API does not have, at any depth,
// fails and is named; so does a kind it does not know.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("kubernetes", "drover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sts []byte
	for _, d := range yamlDocs(b) {
		if bytes.Contains(d, []byte("kind: StatefulSet")) {
			sts = d
		}
	}
	so, err := os.ReadFile(filepath.Join("keda", "scaledobject.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		doc  []byte
		want string
	}{
		"misspelt pod field":  {bytes.Replace(sts, []byte("terminationGracePeriodSeconds:"), []byte("terminationGracePeriod:"), 1), "terminationGracePeriod"},
		"unknown probe field": {bytes.Replace(sts, []byte("periodSeconds: 2"), []byte("periodSeconds: 2\n            everySeconds: 2"), 1), "everySeconds"},
		"duplicated field":    {bytes.Replace(sts, []byte("replicas: 3"), []byte("replicas: 3\n  replicas: 4"), 1), "replicas"},
		"keda spec field":     {bytes.Replace(so, []byte("cooldownPeriod:"), []byte("coolDownPeriod:"), 1), "coolDownPeriod"},
		"unknown kind":        {[]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"), `kind "Pod"`},
	} {
		if bytes.Equal(c.doc, sts) || bytes.Equal(c.doc, so) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, err := decodeManifest(c.doc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name %s", name, err, c.want)
		}
	}
}
