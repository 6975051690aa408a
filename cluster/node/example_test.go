package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// Embedding a node with your own handler. The program registers a Go
// handler under a name in Options.Handlers; a source in handler mode names
// it with handler_name. The handler writes to its own table through the tx
// it is given: that is the batch's fenced transaction, so its rows commit
// together with the source's checkpoint, or not at all, and a batch
// retried after a crash or a failover is not counted twice.
//
// The source here is an in-memory stream the program makes itself and
// hands to the node through Options.OpenSource, so that it can publish to
// it; a real deployment names a Kafka topic, a NATS stream, ... in the
// configuration and leaves OpenSource nil.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "drover-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	storeURL := "sqlite:" + filepath.Join(dir, "drover.db")

	cfg, err := config.Parse([]byte(`
node: {name: node-1, debug_addr: "127.0.0.1:0"}
cluster: {bind: "127.0.0.1:0", profile: fast}
store: {url: "`+storeURL+`"}
sources:
  - name: payments
    type: memory
    memory: {partitions: 2}
    mode: handler
    handler_name: balances
    batch_size: 10
`), config.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// balances adds each payment (key: account, value: cents) to the
	// account's row. A body that is not a number can never be applied:
	// actors.Permanent dead-letters that message alone.
	balances := func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS balances (
			account text PRIMARY KEY, payments bigint NOT NULL, cents bigint NOT NULL)`); err != nil {
			return err
		}
		for _, m := range b.Messages {
			cents, err := strconv.ParseInt(string(m.Value), 10, 64)
			if err != nil {
				return actors.Permanent(m, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO balances (account, payments, cents) VALUES ($1, 1, $2)
				ON CONFLICT (account) DO UPDATE SET payments = balances.payments + 1, cents = balances.cents + excluded.cents`,
				string(m.Key), cents); err != nil {
				return err
			}
		}
		return nil
	}

	payments, err := memory.NewStream(memory.StreamConfig{Partitions: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	// 40 payments: account i%4 pays i cents, on partition i%2.
	for i := range 40 {
		m := brokers.Message{Key: []byte(fmt.Sprintf("acct-%d", i%4)), Value: []byte(strconv.Itoa(i))}
		if _, err := payments.Produce(strconv.Itoa(i%2), m); err != nil {
			fmt.Println(err)
			return
		}
	}

	ctx := context.Background()
	n, err := node.Start(ctx, cfg, node.Options{
		Handlers: map[string]actors.Handler{"balances": balances},
		OpenSource: func(ctx context.Context, s config.Source, log *slog.Logger) (node.Source, error) {
			if s.Name == "payments" {
				return node.Source{Stream: payments}, nil
			}
			return node.OpenSource(ctx, s, log)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()

	// Wait, with a deadline, until the handler's table counts every
	// payment (it does not exist before the first batch commits).
	type row struct {
		account         string
		payments, cents int64
	}
	var rows []row
	read := func() (int64, error) {
		rows = rows[:0]
		var total int64
		err := stores.Query(ctx, storeURL, `SELECT account, payments, cents FROM balances ORDER BY account`, nil,
			func(scan func(...any) error) error {
				var r row
				if err := scan(&r.account, &r.payments, &r.cents); err != nil {
					return err
				}
				rows = append(rows, r)
				total += r.payments
				return nil
			})
		return total, err
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for total, err := read(); total < 40; total, err = read() {
		select {
		case <-deadline.C:
			fmt.Printf("gave up with %d of 40 payments applied (last error: %v)\n", total, err)
			return
		case <-tick.C:
		}
	}

	for _, r := range rows {
		fmt.Printf("%s: %d payments, %d cents\n", r.account, r.payments, r.cents)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Shutdown(sctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// acct-0: 10 payments, 180 cents
	// acct-1: 10 payments, 190 cents
	// acct-2: 10 payments, 200 cents
	// acct-3: 10 payments, 210 cents
}
