package testkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// Testing your own handler under failures. The testkit runs three nodes,
// an in-memory stream and a store in one process, in virtual time, from a
// seed: the same seed gives the same run. The handler is the one the
// program would register with node.Options.Handlers; here it keeps a
// balance per account with the store-neutral Get and Put of its
// transaction (the default memory store has no SQL). While payments
// arrive, one node is killed (kill -9: no handoff) and another cut off
// from the rest of the cluster; after Settle, Report counts what the
// store committed against what was published: nothing lost, nothing
// applied twice. The balances prove the same from the handler's side: a
// batch applied twice would count its payments twice.
func ExampleCluster_handler() {
	type balance struct {
		Payments int64 `json:"payments"`
		Cents    int64 `json:"cents"`
	}
	handler := func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		for _, m := range b.Messages {
			cents, err := strconv.ParseInt(string(m.Value), 10, 64)
			if err != nil {
				return actors.Permanent(m, err)
			}
			var bal balance
			doc, ok, err := tx.Get(ctx, "balances", string(m.Key))
			if err != nil {
				return err
			}
			if ok {
				if err := json.Unmarshal(doc, &bal); err != nil {
					return err
				}
			}
			bal.Payments++
			bal.Cents += cents
			if doc, err = json.Marshal(bal); err != nil {
				return err
			}
			if err := tx.Put(ctx, "balances", string(m.Key), doc); err != nil {
				return err
			}
		}
		return nil
	}

	c, err := testkit.New(testkit.Config{Seed: 42, Nodes: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.AddStream(actors.SourceSpec{Name: "payments", Handler: handler, BatchSize: 10}, 4); err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Start(); err != nil {
		fmt.Println(err)
		return
	}

	// 400 payments over 8 virtual seconds, 20 every 400 ms: account i%5
	// pays i cents, on partition i%4.
	var published int
	for burst := range 20 {
		c.At(time.Duration(burst)*400*time.Millisecond, func() {
			for j := range 20 {
				i := burst*20 + j
				m := brokers.Message{Key: []byte(fmt.Sprintf("acct-%d", i%5)), Value: []byte(strconv.Itoa(i))}
				if _, err := c.Publish("payments", strconv.Itoa(i%4), m); err == nil {
					published++
				}
			}
		})
	}
	c.Run(2 * time.Second)
	fail := func(err error) {
		if err != nil {
			fmt.Println(err)
		}
	}
	held := map[string]bool{} // the units node-1 owns when it dies
	for unit, owners := range c.Owners() {
		if slices.Contains(owners, "node-1") {
			held[unit] = true
		}
	}
	owned := len(held)
	fail(c.Kill("node-1"))
	c.Run(2 * time.Second)
	fail(c.Partition("node-2"))
	c.Run(3 * time.Second)
	fail(c.Heal("node-2"))
	fail(c.Restart("node-1"))
	if !c.Settle(time.Minute) {
		fmt.Println("did not settle")
	}

	r := c.Report()
	fmt.Printf("published=%d applied=%d lost=%d duplicated=%d violations=%d\n",
		published, r.Applied, r.Lost, r.Duplicated, len(r.Violations))
	for i, v := range r.Violations {
		if i == 3 {
			fmt.Printf("... and %d more\n", len(r.Violations)-3)
			break
		}
		fmt.Println(v)
	}
	for _, f := range r.Failovers {
		if f.From == "node-1" {
			delete(held, f.Unit)
		}
	}
	fmt.Printf("node-1 owned units and all failed over: %t\n", owned > 0 && len(held) == 0)
	rows, err := c.Store().Records(context.Background(), "balances", "", 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range rows {
		var bal balance
		if err := json.Unmarshal(row.Doc, &bal); err != nil {
			fmt.Println(err)
		}
		fmt.Printf("%s: %d payments, %d cents\n", row.Key, bal.Payments, bal.Cents)
	}
	// Output:
	// published=400 applied=400 lost=0 duplicated=0 violations=0
	// node-1 owned units and all failed over: true
	// acct-0: 80 payments, 15800 cents
	// acct-1: 80 payments, 15880 cents
	// acct-2: 80 payments, 15960 cents
	// acct-3: 80 payments, 16040 cents
	// acct-4: 80 payments, 16120 cents
}
