package testkit

import (
	"fmt"
	"strings"
	"time"
)

// Explain formats a failed run for humans: the broken invariants, the
// scenario, and how to replay it.
func (r SimResult) Explain() string {
	var b strings.Builder
	writeViolations(&b, r.Violations)
	b.WriteString("scenario:\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	fmt.Fprintf(&b, "replay: drover sim --seed %d -v\n", r.Seed)
	return b.String()
}

// writeViolations writes the first ten broken invariants, one a line, and
// how many more there are.
func writeViolations(b *strings.Builder, vs []Violation) {
	for i, v := range vs {
		if i == 10 {
			fmt.Fprintf(b, "... and %d more broken invariants\n", len(vs)-10)
			break
		}
		fmt.Fprintf(b, "invariant broken: %s\n", v)
	}
}

func stepTime(s string) time.Duration {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	d, _ := time.ParseDuration(strings.TrimPrefix(f[0], "t="))
	return d
}
