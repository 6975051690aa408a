// Package debug serves a node's debug endpoint (DESIGN §10, Contract):
//
//	GET /debug/tree                 this node's tree (actors.Tree) as JSON
//	GET /debug/tree?scope=cluster   {"nodes": [<tree>, …]}: this node's tree and
//	                                every other live member's, asked over HTTP
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
//     http://<DebugAddr>/debug/tree, each with Config.FetchTimeout (2 s by
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
//     drops the token from the address bar. The cluster scope sends the
//     token to the other members (a cluster shares one token). Loopback
//     without a token is open.
//   - The page loads nothing from anywhere else (no CDN, no fonts): its
//     Content-Security-Policy allows only inline style and script and
//     requests to its own origin.
//
// # Goroutines
//
// Start runs net/http's Serve on one goroutine the Server owns; net/http
// runs each connection on its own goroutine, and a cluster request starts
// one goroutine per other member and waits for all of them before it
// answers. Shutdown stops accepting, waits for the requests in flight and
// for Serve to return, and closes the idle connections of the Server's own
// client. When Shutdown's context ends first it closes the connections at
// once; a cluster request then still runs until its member requests end
// (FetchTimeout at most).
package debug
