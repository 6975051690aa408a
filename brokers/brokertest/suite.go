package brokertest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Definition is one named conformance test.
type Definition struct {
	// Name is the subtest name and what a Plan lists.
	Name string
	// Doc says what the definition checks, for READMEs.
	Doc string
	// Needs lists the fixture capabilities the definition uses.
	Needs []Capability
}

// Plan says which definitions an adapter runs. Every definition of the
// shape must be in exactly one of Run and LeaveOut.
type Plan struct {
	// Run names the definitions to run.
	Run []string
	// LeaveOut maps each definition not run to the reason, written for a
	// reader of the adapter's README.
	LeaveOut map[string]string
}

// def is a definition with its body, for a harness of type H.
type def[H any] struct {
	Definition
	run func(t *testing.T, h H)
}

type (
	streamDef = def[StreamHarness]
	queueDef  = def[QueueHarness]
)

// StreamDefinitions lists the stream definitions in the order they run.
func StreamDefinitions() []Definition { return definitions(streamDefs) }

// QueueDefinitions lists the queue definitions in the order they run.
func QueueDefinitions() []Definition { return definitions(queueDefs) }

func definitions[H any](defs []def[H]) []Definition {
	out := make([]Definition, 0, len(defs))
	for _, d := range defs {
		out = append(out, d.Definition)
	}
	return out
}

// RunStream runs the stream definitions plan names, each as a subtest with
// a fresh fixture from h.
func RunStream(t *testing.T, h StreamHarness, plan Plan) {
	t.Helper()
	run(t, streamDefs, h, plan)
}

// RunQueue runs the queue definitions plan names, each as a subtest with a
// fresh fixture from h.
func RunQueue(t *testing.T, h QueueHarness, plan Plan) {
	t.Helper()
	run(t, queueDefs, h, plan)
}

func run[H any](t *testing.T, defs []def[H], h H, plan Plan) {
	t.Helper()
	selected := checkPlan(t, definitions(defs), plan)
	for _, d := range defs {
		if !selected[d.Name] {
			continue
		}
		t.Run(d.Name, func(t *testing.T) { d.run(t, h) })
	}
}

// checkPlan fails t when plan does not account for every definition exactly
// once, logs the reasons of those left out, and returns the set to run.
func checkPlan(t *testing.T, defs []Definition, plan Plan) map[string]bool {
	t.Helper()
	if problems := planProblems(defs, plan); len(problems) > 0 {
		t.Fatalf("brokertest plan:\n  %s", strings.Join(problems, "\n  "))
	}
	left := make([]string, 0, len(plan.LeaveOut))
	for name := range plan.LeaveOut {
		left = append(left, name)
	}
	sort.Strings(left)
	for _, name := range left {
		t.Logf("brokertest: %s left out: %s", name, plan.LeaveOut[name])
	}
	run := map[string]bool{}
	for _, name := range plan.Run {
		run[name] = true
	}
	return run
}

// planProblems lists what is wrong with plan for defs.
func planProblems(defs []Definition, plan Plan) []string {
	known := map[string]bool{}
	for _, d := range defs {
		known[d.Name] = true
	}
	run := map[string]bool{}
	var problems []string
	for _, name := range plan.Run {
		switch {
		case !known[name]:
			problems = append(problems, fmt.Sprintf("Run names unknown definition %q", name))
		case run[name]:
			problems = append(problems, fmt.Sprintf("Run names %q twice", name))
		}
		run[name] = true
	}
	left := make([]string, 0, len(plan.LeaveOut))
	for name := range plan.LeaveOut {
		left = append(left, name)
	}
	sort.Strings(left)
	for _, name := range left {
		switch {
		case !known[name]:
			problems = append(problems, fmt.Sprintf("LeaveOut names unknown definition %q", name))
		case run[name]:
			problems = append(problems, fmt.Sprintf("%q is both run and left out", name))
		case strings.TrimSpace(plan.LeaveOut[name]) == "":
			problems = append(problems, fmt.Sprintf("%q is left out without a reason", name))
		}
	}
	for _, d := range defs {
		if _, out := plan.LeaveOut[d.Name]; !run[d.Name] && !out {
			problems = append(problems, fmt.Sprintf("definition %q is neither run nor left out with a reason", d.Name))
		}
	}
	return problems
}
