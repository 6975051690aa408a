package brokertest

import (
	"strings"
	"testing"
)

func TestPlanProblems(t *testing.T) {
	defs := []Definition{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	tests := []struct {
		name string
		plan Plan
		want []string // substrings, one per problem
	}{
		{"complete", Plan{Run: []string{"a", "b"}, LeaveOut: map[string]string{"c": "no server"}}, nil},
		{"missing", Plan{Run: []string{"a"}, LeaveOut: map[string]string{"c": "x"}}, []string{`"b" is neither run nor left out`}},
		{"unknown run", Plan{Run: []string{"a", "b", "c", "d"}}, []string{`unknown definition "d"`}},
		{"unknown leave out", Plan{Run: []string{"a", "b", "c"}, LeaveOut: map[string]string{"z": "x"}}, []string{`unknown definition "z"`}},
		{"twice", Plan{Run: []string{"a", "a", "b", "c"}}, []string{`"a" twice`}},
		{"both", Plan{Run: []string{"a", "b", "c"}, LeaveOut: map[string]string{"a": "x"}}, []string{`"a" is both`}},
		{"no reason", Plan{Run: []string{"a", "b"}, LeaveOut: map[string]string{"c": " "}}, []string{`"c" is left out without a reason`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planProblems(defs, tt.plan)
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Fatalf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestDefinitionNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range append(StreamDefinitions(), QueueDefinitions()...) {
		if seen[d.Name] || d.Name == "" || d.Doc == "" {
			t.Fatalf("definition %+v: duplicate or missing name or doc", d)
		}
		seen[d.Name] = true
	}
}
