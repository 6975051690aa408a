//go:build drover_mutate

package testkit_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/mutate"
)

// Each scripted edge fails with the switch that undoes its fix.
func TestEdgesFailWithoutTheirFix(t *testing.T) {
	for _, e := range edges {
		if e.mutate == "" {
			continue
		}
		t.Run(e.item+"/"+e.name, func(t *testing.T) {
			mutate.Set(e.mutate, true)
			defer mutate.Set(e.mutate, false)
			err := e.run(t)
			if err == nil {
				t.Fatalf("passes with %s on: it does not test the fix", e.mutate)
			}
			t.Logf("with %s on: %v", e.mutate, err)
		})
	}
}
