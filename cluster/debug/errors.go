package debug

import "errors"

var (
	// ErrTokenRequired is returned by New when the listen address is not a
	// loopback address and no token is configured.
	ErrTokenRequired = errors.New("node.debug_token: required when node.debug_addr is not a loopback address")

	// ErrStarted is returned by Start when the server was started before.
	ErrStarted = errors.New("debug server already started")
)
