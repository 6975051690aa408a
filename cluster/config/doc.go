// Package config reads a node's YAML configuration file (architecture §9):
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
// a literal written in the file is an error naming the field. So is a
// secret written into a URL that may carry one (store.url, nats.url): a
// user info password, a ?password= (or other secret-named) query
// parameter, a key=value DSN's password=, and a user name alone in a
// nats:// URL, which NATS reads as a token.
// A Secret never prints its value: fmt (every verb), encoding/json, slog
// and YAML all show "[redacted]"; Reveal gives the value to the code that
// uses it. Those URLs are SecretURLs, printed as internal/redact masks
// them (every URL and DSN form the stores and brokers take). Config.Redacted
// returns a copy safe to print by any means. Problems never quote a
// secret, nor any value that came through a reference: they say "the
// value from ${file:/etc/passwd}" instead (a file read into the wrong
// field may be anything); a value longer than 100 bytes is described by
// its size.
//
// Limits. A config is at most 1 MiB (Load reads no further: /dev/zero is
// refused), one ${file:} at most 64 KiB of a regular file, and all
// references together at most 1 MiB; at most 1,000 sources. The YAML
// reader refuses, before goccy/go-yaml's parser or decoder see them, the
// shapes that library is slow on or exhausted by (see readYAML): more
// than 200,000 tokens, nesting deeper than 32, more than 100 keys in a
// mapping or 2,000 entries in a block list, aliases used as keys, keys
// that are not plain strings, and aliases that stand for more than
// 100,000 values in all. Parse reports at most 100 problems and counts the
// rest. A leading UTF-8 byte order mark is skipped; UTF-16 is refused.
// FuzzParse holds Parse to 1 s and 100 MB per input.
//
// Exposure. As node.debug_token is required when node.debug_addr is not a
// loopback address, cluster.secret_key is required when cluster.bind or
// cluster.advertise is not. node.capacity is at most cluster.max_capacity
// (default 16, itself at most placement.MaxCapacity, 1000), the clamp every
// node applies to the capacity the others gossip (the smallest value any
// alive member gossips, so it may differ between nodes for a while).
// node.debug_tls holds paths of PEM files (cert and key together,
// ca alone allowed), never their content: PEM text there is refused
// without being quoted.
//
// Schema. Every section is read by one reader that walks a struct's
// fields by their yaml tags (read.go); a broker section is the adapter's
// own config (kafka.Config, sqs.Config, kinesis.Config, pubsub.Config,
// nats.SourceConfig), whose Validate problems are reported under
// sources[i].<type>; only the memory section is this package's. Defaults
// the file sets are in defaults.go; an adapter's zero values are its own
// defaults.
//
// The package is pure except where Options says: the environment, files
// named by ${file:…} and the hostname (the default node name) are read
// through Options' functions, which tests replace. It starts no goroutines.
package config
