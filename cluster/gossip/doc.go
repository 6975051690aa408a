// Package gossip implements placement.Membership on hashicorp/memberlist.
//
// Join starts a memberlist node, gossips this node's metadata (name, debug
// address, version, capacity, max_capacity, alive/leaving, the sources it
// runs) and joins the cluster through any live member. Nothing outside this package sees a
// memberlist type.
//
// # Guarantees
//
//   - Members lists the members memberlist does not consider dead or left
//     (suspects included, until they are declared dead), sorted by name;
//     each carries the metadata it gossips. With the "fast" profile a
//     member that stops without leaving disappears from the others' views
//     within about a second (probe 200 ms, suspicion 4 probe intervals);
//     with "default" within about 5 s. A graceful Leave is seen at once.
//   - Authentication. With Config.SecretKey, memberlist encrypts and
//     authenticates every message (AES-256-GCM) and refuses any it cannot
//     open, so every member that joined holds the key. Without it anyone
//     who reaches the port can join and gossip any metadata: Validate (and
//     so Join) refuses a Bind or Advertise that is not a loopback address
//     without a key (ErrSecretKeyRequired). The metadata includes whether
//     the debug endpoint serves TLS (Member.DebugTLS).
//   - A node whose gossip key differs from the cluster's (or that has none
//     when the cluster has one, or the reverse) fails to join with
//     ErrEncryption. A node whose name is already used by a live member at
//     another address fails to join with ErrDuplicateName.
//   - Seeds. Config.Join may list this node itself (every node may list
//     every seed): its own addresses are left out of the join. A node
//     whose join list names itself starts a cluster of its own, with a
//     warning, when no other seed answers within JoinTimeout; one whose
//     list does not name itself fails to join then.
//   - Healing. Split memberships merge by themselves: on a timer (every
//     1–1.5 s on "fast", 2–3 s on "default") each node tries to join the
//     addresses of Config.Join that are not live members', and the
//     addresses of members it saw die within the last 5 minutes. So a
//     first node restarted with an empty join list at its old address, or
//     two halves of a partition, are one cluster again within a few
//     seconds of reaching each other (tested: under 5 s on "fast"). A
//     member that left gracefully is not tried again unless it is in
//     Config.Join. Leave announces "leaving" before it leaves (when
//     SetState has not), which is how the others tell a leave from a
//     death. heal.go says the details.
//   - Sources. Config.Sources and SetSources gossip the source tags a node
//     runs, 8 bytes each (base64 in the JSON metadata); when they do not
//     fit in memberlist's 512 bytes of metadata (about 40 tags with short
//     names; fewer with long names, addresses and versions), their digest
//     (placement.SourceDigestOf) goes instead, and every member, this one's
//     Local included, shows Sources nil and SourceDigest set. Nil tags say
//     nothing (as a drover from before sources were gossiped, whose
//     metadata decodes to Sources nil); empty tags say "runs none".
//   - memberlist's own log lines go to the configured *slog.Logger at the
//     level they were written with (DEBUG, INFO, WARN, ERR). Each healing
//     attempt logs at DEBUG, a merge at INFO.
//
// # Goroutines
//
// memberlist runs its own goroutines (listeners, probe, gossip and
// push/pull tickers) and calls this package's delegates from them; the
// delegates never block: a change of the view is a non-blocking send on a
// one-slot channel. One goroutine owned by the Membership drains that
// channel and calls the Watch callbacks, so a burst of changes becomes one
// call or two. SetState and SetSources broadcast from a goroutine the
// Membership owns. The healer is one goroutine plus one per attempt in
// flight (at most one per address); no caller ever waits for it. Leave
// stops the healer first (cancelling its reachability checks), then
// memberlist, and waits for every goroutine the Membership started: an
// attempt already inside memberlist's Join finishes first, which takes
// long only when a peer accepts connections but does not answer
// (memberlist's TCP timeout, 10 s, bounds it). After Leave returns no
// Watch callback runs. memberlist's own goroutines end shortly after its
// Shutdown, which does not wait for them: one may still write a line to
// the Logger just after Leave returns.
package gossip
