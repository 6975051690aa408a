// Package config reads a node's YAML configuration file (DESIGN §9):
// node, cluster, store, log and sources, with their defaults, checked
// field by field.
//
// Parse reports every problem at once, each with the path of its field
// (sources[1].kafka.topic: required), as Errors; unknown fields are
// problems too. `drover check` prints them and exits 2. Valid but dubious
// settings are Warnings, printed by `drover check`, which then exits 0: a
// cluster section whose join list is empty or names only this node (a node
// restarted so forms a cluster of its own until the others reach it; every
// node should list every seed).
//
// Secrets. ${env:NAME} and ${file:PATH} inside any string value are
// replaced by an environment variable or a file's content (trailing
// newlines trimmed); they are the ways to keep a secret out of the file
// itself. A secret field (node.debug_token, cluster.secret_key, a Kafka
// SASL password, a NATS password, an AWS secret access key) must use one:
// a literal written in the file is an error naming the field, and so is a
// password written into a URL that may carry one (store.url, nats.url).
// A Secret never prints its value: fmt (every verb), encoding/json, slog
// and YAML all show "[redacted]"; Reveal gives the value to the code that
// uses it. Those URLs are SecretURLs, printed with passwords masked.
// Config.Redacted returns a copy safe to print by any means. Error messages
// never quote a secret.
//
// Exposure. As node.debug_token is required when node.debug_addr is not a
// loopback address, cluster.secret_key is required when cluster.bind or
// cluster.advertise is not. node.capacity is at most cluster.MaxCapacity
// (1000). node.debug_tls holds paths of PEM files (cert and key together,
// ca alone allowed), never their content: PEM text there is refused
// without being quoted.
//
// The package is pure except where Options says: the environment, files
// named by ${file:…} and the hostname (the default node name) are read
// through Options' functions, which tests replace. It starts no goroutines.
package config
