//go:build drover_mutate

package node_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/mutate"
)

// The slow-handler runs of e2e_slowq_test.go with the deadline extension
// switched off (mutate.NoExtend: startExtend does nothing): each must
// report a redelivery, on the real server. Run with:
// go test -tags drover_mutate -run SlowHandlerWithoutExtension ./cluster/node/
func TestE2ESlowHandlerWithoutExtensionIsCaught(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(*testing.T) []string
	}{{"sqs", slowSQS}, {"pubsub", slowPubSub}, {"nats", slowNATS}} {
		t.Run(c.name, func(t *testing.T) {
			mutate.Set(mutate.NoExtend, true)
			defer mutate.Set(mutate.NoExtend, false)
			problems := c.run(t)
			if len(problems) == 0 {
				t.Fatal("without the extension the slow-handler run reports nothing: the test cannot fail")
			}
			redelivery := false
			for _, p := range problems {
				t.Logf("caught: %s", p)
				redelivery = redelivery || strings.Contains(p, "more than once") || strings.Contains(p, "redeliver") ||
					strings.Contains(p, "deliveries") || strings.Contains(p, "delivered")
			}
			if !redelivery {
				t.Error("no problem names a redelivery")
			}
		})
	}
}
