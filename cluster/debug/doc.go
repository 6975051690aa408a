// Package debug serves a node's debug endpoint (architecture §10, Contract):
//
//	GET /debug/tree                 this node's tree (actors.Tree) as JSON
//	GET /debug/tree?scope=cluster   {"nodes": [<tree>, …], "gone": [<gone>, …]}:
//	                                this node's tree and every other live
//	                                member's, asked over HTTP, and the members
//	                                that left the view lately
//	GET /debug/history              per source applied/s and lag_seconds over
//	                                the last 10 minutes, and the moves
//	GET /debug/                     a self-contained HTML page that polls the
//	                                cluster tree every second and shows it live
//	GET /metrics                    Prometheus metrics of Config.Registry
//	GET /healthz                    200 "ok" while the process serves
//	GET /readyz                     200 "ready", or 503 with Node.Ready's error
//
// # Guarantees
//
//   - Lists in the JSON are never null: a node without sources has
//     "sources": [].
//   - The cluster scope asks every other member concurrently at
//     http://<DebugAddr>/debug/tree (https:// when the member gossips that
//     its endpoint serves TLS), each with Config.FetchTimeout (2 s by
//     default), so one answer takes at most about that long. A member
//     that fails (refused, timed out, non-200, not a tree, or answering
//     under another name) is listed as {"node": <name>, "error": <what went
//     wrong>, "members": [], "sources": []}. Nodes are sorted by name.
//     A DebugAddr with no host or an unspecified one (0.0.0.0:7070) is
//     reached at the host of the member's gossip address.
//   - Authentication: New refuses a non-loopback Addr without a Token
//     (ErrTokenRequired, naming node.debug_token). With a Token, every route
//     but the probes answers 401 unless the request carries
//     "Authorization: Bearer <token>" (compared in constant time); /healthz
//     and /readyz answer without it, but /readyz then says only "not
//     ready", not why (the reason may name hosts). The HTML
//     page also accepts ?token=<token>, because a browser cannot add a
//     header when it opens a URL; the page then sends the header itself and
//     drops the token from the address bar. Loopback without a token is
//     open.
//   - Who gets the token. The cluster scope sends the token (a cluster
//     shares one) only to members whose gossip is authenticated, which is
//     Config.MembersAuthenticated: gossip encrypted with cluster.secret_key,
//     so that every member that joined holds the key. Without it (plain
//     gossip, which the config allows on loopback only) no member is
//     authenticated: the token is sent to no one, the other members are not
//     asked at all, and each is listed with ErrMembersNotAuthenticated as
//     its error. Without a token the members are asked either way: nothing
//     secret is sent. When this endpoint serves HTTPS, the token also goes
//     only over HTTPS: a member that serves plain HTTP is not asked
//     (ErrMemberPlainHTTP). Redirects from a member are not followed.
//   - TLS (node.debug_tls). With Config.TLSCert and TLSKey the endpoint
//     serves HTTPS only (TLS 1.2 or later, HTTP/1.1); New reads the files
//     (regular files of at most 1 MiB each) and fails naming the field
//     when they cannot be used; errors name paths, never a key's content.
//     Members are verified with Config.TLSCA, or the system's roots; a
//     member's certificate must name the host the view dials (its debug
//     address's host, or its gossip address's host when the debug address
//     has none): an IP SAN for an IP address.
//   - Slow clients. ReadHeaderTimeout 5 s, ReadTimeout 10 s (a request,
//     headers and body), WriteTimeout FetchTimeout + 10 s (a cluster answer
//     waits for the members first), IdleTimeout 30 s (above the page's
//     one-second poll), each settable in Config; the TLS handshake gets
//     the shortest of them. A client that trickles its request or reads
//     nothing of its answer is cut off when its timeout passes.
//   - Fan-out cap. At most one cluster fan-out runs at a time: a cluster
//     request that comes while one runs waits for it and answers with its
//     result, so however many clients poll, each member is asked at most
//     once at a time by this node.
//   - Gone members. Each cluster fan-out is seen by a memory that keeps
//     the last tree it read of each member. A member missing from
//     Node.Members that was in the last view is listed under "gone" (not
//     under "nodes": its units are not owned there) with that tree and
//     {"since", "how": "died"|"left", "last_error", "tree_at"}, for
//     Config.GoneFor (5 min), at most Config.MaxGone (32) of them, the one
//     gone longest dropped first; a member listed again is live again.
//     Times come from Config.Clock.
//   - History. From Start to Shutdown a sampler reads the cluster view
//     every Config.SampleEvery (5 s) of Config.Clock into a ring covering
//     HistoryWindow (10 min; at most 1,200 samples). Rates come from each
//     unit's applied counter (a reset or a move counts the new counter
//     whole); lag_seconds is read from the unit JSON where present.
//   - The page loads nothing from anywhere else (no CDN, no fonts): its
//     Content-Security-Policy allows its own style and script elements by
//     SHA-256 (no 'unsafe-inline', so no inline handlers and no eval) and
//     requests to its own origin.
//
// # Goroutines
//
// Start runs net/http's Serve on one goroutine the Server owns, and the
// sampler on another (unless SampleEvery is negative); net/http
// runs each connection on its own goroutine, and a cluster request that
// starts a fan-out starts one goroutine per other member and waits for all
// of them before it answers (the other cluster requests meanwhile wait on
// it; the fan-out goes on when its own client leaves, bounded by
// FetchTimeout). Shutdown stops the sampler and waits for it (a sample in
// flight ends within FetchTimeout), stops accepting, waits for the requests
// in flight and for Serve to return, and closes the idle connections of the Server's own
// client. When Shutdown's context ends first it closes the connections at
// once; a cluster request then still runs until its member requests end
// (FetchTimeout at most).
package debug
