package config

import (
	"github.com/drover-dev/drover/brokers"
)

// Redacted is what a set secret prints as.
const Redacted = brokers.Redacted

// Secret is a config value that must never be printed: a token, a key, a
// password. It is brokers.Secret, the type the adapters' Configs hold
// their secrets in: every way of printing it shows "[redacted]" (or ""
// when unset); Reveal returns the value.
type Secret = brokers.Secret

// SecretURL is a URL, or a comma-separated list of URLs, or a key=value
// DSN, that may carry a secret: brokers.SecretURL, which prints as
// internal/redact masks it (every password, token and secret query
// parameter replaced by "xxxxx"). Reveal returns the value.
type SecretURL = brokers.SecretURL
