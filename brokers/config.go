package brokers

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/drover-dev/drover/internal/redact"
)

// What every adapter's Config shares: the Secret type of its secret
// settings and the FieldErrors its Validate returns. An adapter's Config
// is the one description of its settings (architecture §9): its fields
// carry the YAML names a node's config file uses (`yaml:"…"` tags), its
// Validate names each problem by that path, and cluster/config reads the
// section straight into it and puts "sources[i].<type>." in front of the
// paths.

// Redacted is what a set Secret prints as.
const Redacted = "[redacted]"

// Secret is a setting that must never be printed: a password, a token, a
// key. Every way of printing it (fmt verbs including %#v and %x,
// encoding/json, encoding.TextMarshaler, slog, YAML marshalling) shows
// "[redacted]" (or "" when unset). Reveal returns the value, for the code
// that hands it to a client.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" when the secret is unset.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// Format prints the redacted form whatever the verb.
func (s Secret) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), s.String())
}

// GoString returns the redacted form.
func (s Secret) GoString() string { return fmt.Sprintf("brokers.Secret(%q)", s.String()) }

// MarshalJSON returns the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText returns the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML returns the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue returns the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// SecretURL is a URL, or a comma-separated list of URLs, or a key=value
// DSN, that may carry a secret (postgres://user:pw@host/db,
// postgres://host/db?password=pw, host=h password=pw,
// nats://user:pw@host:4222, nats://token@host:4222). It prints as
// internal/redact masks it: every password, token and secret query
// parameter replaced by "xxxxx", whatever the verb or encoding. Reveal
// returns the value.
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
func (u SecretURL) GoString() string { return fmt.Sprintf("brokers.SecretURL(%q)", u.String()) }

// MarshalJSON returns the masked form.
func (u SecretURL) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// MarshalText returns the masked form.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// MarshalYAML returns the masked form.
func (u SecretURL) MarshalYAML() (any, error) { return u.String(), nil }

// LogValue returns the masked form.
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// FieldError is one problem of a Config: the path of the setting, in the
// names of the config file ("sasl.username", "brokers[1]"; "" for the
// Config as a whole), and what is wrong with it. Msg never holds a
// Secret's value.
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// FieldErrors are every problem a Validate found, in the order of the
// Config's fields. An adapter's Validate returns them wrapped in its name
// ("kafka config: …"); errors.As finds them.
type FieldErrors []FieldError

func (e FieldErrors) Error() string {
	var b strings.Builder
	for i, fe := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Add records a problem at path.
func (e *FieldErrors) Add(path, format string, args ...any) {
	*e = append(*e, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Err returns e as an error wrapped with prefix ("kafka config"), or nil
// when there is no problem.
func (e FieldErrors) Err(prefix string) error {
	if len(e) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", prefix, e)
}
