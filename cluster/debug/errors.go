package debug

import "errors"

var (
	// ErrTokenRequired is returned by New when the listen address is not a
	// loopback address and no token is configured.
	ErrTokenRequired = errors.New("node.debug_token: required when node.debug_addr is not a loopback address")

	// ErrMembersNotAuthenticated is the error of every other member in a
	// cluster answer when a Token is set but Config.MembersAuthenticated is
	// not: the member is not asked, so the token goes to no one.
	ErrMembersNotAuthenticated = errors.New("gossip is not authenticated (no cluster.secret_key), so the debug token is sent to no other member")

	// ErrMemberPlainHTTP is the error of a member whose endpoint serves
	// plain HTTP, in a cluster answer of an endpoint that serves HTTPS and
	// has a Token: the token goes only over HTTPS.
	ErrMemberPlainHTTP = errors.New("its debug endpoint serves plain HTTP, and with node.debug_tls set the debug token goes only over HTTPS")

	// ErrStarted is returned by Start when the server was started before.
	ErrStarted = errors.New("debug server already started")
)
