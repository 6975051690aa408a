// Package gossip implements cluster.Membership on hashicorp/memberlist.
//
// Join starts a memberlist node, gossips this node's metadata (name, debug
// address, version, capacity, alive/leaving) and joins the cluster through
// any live member. Nothing outside this package sees a memberlist type.
//
// # Guarantees
//
//   - Members lists the members memberlist does not consider dead or left
//     (suspects included, until they are declared dead), sorted by name;
//     each carries the metadata it gossips. With the "fast" profile a
//     member that stops without leaving disappears from the others' views
//     within about a second (probe 200 ms, suspicion 4 probe intervals);
//     with "default" within about 5 s. A graceful Leave is seen at once.
//   - A node whose gossip key differs from the cluster's (or that has none
//     when the cluster has one, or the reverse) fails to join with
//     ErrEncryption. A node whose name is already used by a live member at
//     another address fails to join with ErrDuplicateName.
//   - memberlist's own log lines go to the configured *slog.Logger at the
//     level they were written with (DEBUG, INFO, WARN, ERR).
//
// # Goroutines
//
// memberlist runs its own goroutines (listeners, probe, gossip and
// push/pull tickers) and calls this package's delegates from them; the
// delegates never block: a change of the view is a non-blocking send on a
// one-slot channel. One goroutine owned by the Membership drains that
// channel and calls the Watch callbacks, so a burst of changes becomes one
// call or two. SetState broadcasts from a goroutine the Membership owns.
// Leave stops memberlist and waits for every goroutine the Membership
// started; after it returns no Watch callback runs. memberlist's own
// goroutines end shortly after its Shutdown, which does not wait for them:
// one may still write a line to the Logger just after Leave returns.
package gossip
