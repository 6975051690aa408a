package gossip

import "errors"

var (
	// ErrDuplicateName is returned by Join when a live member at another
	// address already uses the node name.
	ErrDuplicateName = errors.New("node name already used by another live member")

	// ErrEncryption is returned by Join when this node's gossip key does
	// not match the cluster's: the cluster uses a different key, or this
	// node has none while the cluster has one, or the reverse.
	ErrEncryption = errors.New("gossip encryption does not match the cluster's (missing or different secret key)")

	// ErrSecretKeyRequired is returned by Validate and Join when Bind or
	// Advertise is not a loopback address and no SecretKey is set.
	ErrSecretKeyRequired = errors.New("secret_key: required when bind or advertise is not a loopback address")

	// ErrLeft is returned by SetState after Leave.
	ErrLeft = errors.New("membership has left the cluster")
)
