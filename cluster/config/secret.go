package config

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/redact"
)

// Redacted is what a set secret prints as.
const Redacted = brokers.Redacted

// Secret is a config value that must never be printed: a token, a key, a
// password. It is brokers.Secret, the type the adapters' Configs hold
// their secrets in: every way of printing it shows "[redacted]" (or ""
// when unset); Reveal returns the value.
type Secret = brokers.Secret

// SecretURL is a URL, or a comma-separated list of URLs, or a key=value
// DSN, that may carry a secret (postgres://user:pw@host/db,
// postgres://host/db?password=pw, host=h password=pw,
// nats://user:pw@host:4222, nats://token@host:4222). It prints as
// redact.URL masks it: every password, token and secret query parameter
// replaced by "xxxxx". Reveal returns the value.
type SecretURL string

// Reveal returns the URL itself, for the code that uses it.
func (u SecretURL) Reveal() string { return string(u) }

// String returns the URL with its secrets masked.
func (u SecretURL) String() string { return redact.URL(string(u)) }

// Format prints the masked form whatever the verb.
func (u SecretURL) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), u.String())
}

// GoString returns the masked form.
func (u SecretURL) GoString() string { return fmt.Sprintf("config.SecretURL(%q)", u.String()) }

// MarshalJSON returns the masked form.
func (u SecretURL) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// MarshalText returns the masked form.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// MarshalYAML returns the masked form.
func (u SecretURL) MarshalYAML() (any, error) { return u.String(), nil }

// LogValue returns the masked form.
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// The sections holding secrets format themselves with their secrets
// redacted. fmt prints a nested pointer with %s or %q through its "bad
// verb" path, which ignores the Secret's own methods; a Format method on
// the pointed-to type is consulted before that.

type natsView NATS

// Format prints the section with its password and URL redacted.
func (n NATS) Format(f fmt.State, verb rune) {
	v := natsView(n)
	v.Password = Secret(v.Password.String())
	v.URL = SecretURL(v.URL.String())
	fmt.Fprintf(f, fmt.FormatString(f, verb), v)
}
