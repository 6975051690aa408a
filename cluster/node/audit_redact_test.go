package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// A control's audit args may carry a broker client's error (a reload
// that failed half-way): a URL's password in it is masked before the
// audit table keeps it, as in last_error and the event log.
func TestAuditArgsMaskURLSecrets(t *testing.T) {
	dir := t.TempDir()
	yaml := fmt.Sprintf(`node: {name: n1, debug_addr: "127.0.0.1:0"}
cluster: {bind: "127.0.0.1:0"}
store: {url: "sqlite:%s/d.db"}
sources:
  - {name: m, type: memory, memory: {partitions: 1}, records: {key: id}}
`, dir)
	n, err := Start(t.Context(), parseConfig(t, yaml, config.Options{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.audit(t.Context(), debug.ControlRequest{Action: debug.ActionReload, By: "ann"},
		"added s; failed: sources[1] (s): dial postgres://drover:hunter2@db:5432/x: refused")
	es, err := n.store.ListAudit(t.Context(), persistence.AuditFilter{})
	if err != nil || len(es) != 1 {
		t.Fatalf("audit: %+v, %v", es, err)
	}
	if strings.Contains(es[0].Args, "hunter2") || !strings.Contains(es[0].Args, "db:5432") {
		t.Fatalf("audit args %q: want the password masked, the rest kept", es[0].Args)
	}
}
