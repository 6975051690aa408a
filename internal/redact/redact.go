// Package redact masks the secrets in the connection strings drover takes:
// store URLs, PostgreSQL key=value DSNs, NATS server lists, and any other
// URL a config may hold. URL gives the form that is safe to print; Secrets
// gives the secret pieces themselves, so that text from elsewhere (a
// library's error) can be scrubbed of them with Scrub.
//
// What is a secret:
//
//   - the password of a URL's user info (postgres://u:PW@h, nats://u:PW@h),
//     and in every scheme but postgres:// and postgresql:// a user name
//     without a password too: NATS reads nats://TOKEN@h as a token, and an
//     http URL's lone user name may be a key;
//   - the value of a query parameter whose name mentions a password, a
//     secret, a token, a key, a signature, a credential or auth
//     (?password=, ?sslpassword=, X-Amz-Signature=, X-Amz-Credential=,
//     X-Amz-Security-Token=, AWSAccessKeyId=);
//   - in a key=value DSN (host=h password=PW, a value in single quotes,
//     with \' for a quote, or bare), the value of every key named like
//     those parameters.
//
// Parsing is lenient and errs towards masking: the user info of a URL runs
// to the last '@' of the URL, whatever characters the password holds; a
// URL list is split only where a comma is followed by a new scheme://, so a
// PostgreSQL multi-host URL stays one URL; a DSN whose quoting does not
// close is masked from its first secret key on. A sqlite: path and
// memory: hold no secret and print as they are.
//
// Readers disagree on where user info ends when it holds more than one
// '@' (libpq and pgx take the first, net/url and URL the last): CheckAt
// refuses such a URL, and Scrub masks each '@'-piece of a secret anyway.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret URL masks.
const Mask = "xxxxx"

// URL returns s with its secrets replaced by Mask.
func URL(s string) string {
	var b strings.Builder
	walk(s, func(text string, secret bool) {
		if secret {
			b.WriteString(Mask)
		} else {
			b.WriteString(text)
		}
	})
	return b.String()
}

// Secrets returns the secret pieces of s as written, and the
// percent-decoded form of those that are escaped; empty ones are left out.
func Secrets(s string) []string {
	var out []string
	walk(s, func(text string, secret bool) {
		if !secret || text == "" {
			return
		}
		out = append(out, text)
		if d, err := url.PathUnescape(text); err == nil && d != text && d != "" {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(text); err == nil && d != text && d != "" {
			out = append(out, d)
		}
	})
	return out
}

// Scrub replaces every occurrence of each secret in text by Mask; where
// occurrences overlap or touch, their union becomes one Mask. Each secret is masked as written,
// percent-decoded and percent-encoded; one holding an '@' (in any of
// those forms) is masked piece by piece too, each text between two '@'s in
// the same forms: a reader that ends the user info at another '@' than URL
// does (pgx takes the first) quotes the rest of the password as the host.
func Scrub(text string, secrets ...string) string {
	seen := map[string]bool{"": true}
	var ss []string
	add := func(s string) {
		for _, f := range spellings(s) {
			if !seen[f] {
				seen[f] = true
				ss = append(ss, f)
			}
		}
	}
	for _, s := range secrets {
		add(s)
		for _, f := range spellings(s) {
			if strings.Contains(f, "@") {
				for _, p := range strings.Split(f, "@") {
					if len(p) >= minPiece {
						add(p)
					}
				}
			}
		}
	}
	if len(ss) == 0 {
		return text
	}
	// every byte any spelling covers, wherever the occurrences overlap,
	// is masked; each run of masked bytes becomes one Mask, in one pass,
	// so no secret is found again inside a Mask
	hidden := make([]bool, len(text))
	found := false
	for _, s := range ss {
		for from := 0; ; {
			i := strings.Index(text[from:], s)
			if i < 0 {
				break
			}
			for j := from + i; j < from+i+len(s); j++ {
				hidden[j] = true
			}
			found = true
			from += i + 1
		}
	}
	if !found {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if !hidden[i] {
			b.WriteByte(text[i])
			continue
		}
		b.WriteString(Mask)
		for i+1 < len(text) && hidden[i+1] {
			i++
		}
	}
	return b.String()
}

// minPiece is the shortest '@'-piece of a secret Scrub masks on its own:
// masking every "p" of a message for the password "p@ss-secret" would
// garble it and hide nothing worth hiding (the whole secret and its longer
// pieces are masked whatever their length).
const minPiece = 3

// spellings returns s, its percent-decoded forms and its percent-encoded
// forms.
func spellings(s string) []string {
	out := []string{s}
	if d, err := url.PathUnescape(s); err == nil {
		out = append(out, d)
	}
	if d, err := url.QueryUnescape(s); err == nil {
		out = append(out, d)
	}
	return append(out, url.PathEscape(s), url.QueryEscape(s),
		url.UserPassword("", s).String()[1:]) // as net/url writes a password
}

// SecretName reports whether a parameter or DSN key of this name holds a
// secret.
func SecretName(name string) bool {
	n := strings.ToLower(name)
	if d, err := url.QueryUnescape(n); err == nil {
		n = d
	}
	for _, w := range []string{"pass", "pwd", "secret", "token", "key", "signature", "credential", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

var (
	// a new URL of a list starts after a comma with a scheme
	listSplit = regexp.MustCompile(`,\s*[A-Za-z][A-Za-z0-9+.-]*://`)
	// a DSN starts with key=
	dsnStart = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_.-]*\s*=`)
)

// walk splits s into pieces, each secret or not, in order: concatenated,
// they are s.
func walk(s string, emit func(text string, secret bool)) {
	if dsnStart.MatchString(s) {
		dsn(s, emit)
		return
	}
	first := true
	eachURL(s, func(u string) {
		if !first {
			emit(",", false)
		}
		first = false
		one(u, emit)
	})
}

// eachURL calls f with each URL of a list (s not a DSN), without the
// commas that separate them.
func eachURL(s string, f func(string)) {
	for s != "" {
		end := len(s)
		if loc := listSplit.FindStringIndex(s); loc != nil {
			end = loc[0]
		}
		f(s[:end])
		if end == len(s) {
			return
		}
		s = s[end+1:]
	}
}

// ErrUnescapedAt is CheckAt's error. It quotes nothing of the URL.
var ErrUnescapedAt = errors.New("more than one '@' in the URL, so readers disagree on where the password ends " +
	"(pgx would show part of it as the host): percent-encode each '@' in the user name, password, path and query as %40")

// CheckAt returns ErrUnescapedAt when a URL of s (each of a list) holds
// more than one '@' after its scheme. With at most one, every reader finds
// the same user info: libpq and pgx end it at the first '@', net/url and
// URL here at the last. A key=value DSN (values are quoted there) and a
// sqlite: path (an '@' is a file name's) are never refused.
func CheckAt(s string) error {
	if dsnStart.MatchString(s) {
		return nil
	}
	var err error
	eachURL(s, func(u string) {
		rest := u
		if i := strings.Index(u, "://"); i >= 0 {
			if strings.EqualFold(strings.TrimSpace(u[:i]), "sqlite") {
				return
			}
			rest = u[i+3:]
		} else if j := strings.IndexByte(u, ':'); j >= 0 && !strings.ContainsAny(u[:j], "@/") {
			if strings.EqualFold(u[:j], "sqlite") {
				return
			}
			rest = u[j+1:]
		}
		if strings.Count(rest, "@") > 1 {
			err = ErrUnescapedAt
		}
	})
	return err
}

// one masks one URL.
func one(s string, emit func(string, bool)) {
	var start int // where the authority (or, opaque, what follows the scheme) begins
	scheme, authority := "", false
	switch i := strings.Index(s, "://"); {
	case i >= 0:
		scheme, start, authority = strings.ToLower(strings.TrimSpace(s[:i])), i+3, true
	case strings.HasPrefix(s, "//"):
		start, authority = 2, true
	default:
		// scheme:opaque; without a scheme (host:port, user@host:port) the
		// whole is the authority
		if j := strings.IndexByte(s, ':'); j >= 0 && !strings.ContainsAny(s[:j], "@/") {
			scheme, start = strings.ToLower(s[:j]), j+1
		}
	}
	rest := s[start:]
	emit(s[:start], false)
	// where the user info may end: at the last '@' of the URL, whatever
	// the password holds; a sqlite: path is no authority (an
	// '@' in it is a file name's), unless written //authority/path
	at := strings.LastIndexByte(rest, '@')
	if scheme == "sqlite" {
		at = -1
		if !authority && strings.HasPrefix(rest, "//") {
			emit("//", false)
			rest, authority = rest[2:], true
		}
		if authority {
			auth := rest
			if i := strings.IndexByte(auth, '/'); i >= 0 {
				auth = auth[:i]
			}
			at = strings.LastIndexByte(auth, '@')
		}
	}
	if at >= 0 {
		info := rest[:at]
		user, pw, hasPW := strings.Cut(info, ":")
		switch {
		case hasPW:
			emit(user+":", false)
			emit(pw, true)
		case scheme == "postgres" || scheme == "postgresql":
			emit(user, false)
		default:
			emit(user, true) // a token, or a key
		}
		rest = rest[at:]
	}
	q := strings.IndexByte(rest, '?')
	if q < 0 {
		emit(rest, false)
		return
	}
	emit(rest[:q+1], false)
	query, frag, hasFrag := strings.Cut(rest[q+1:], "#")
	for i, kv := range strings.Split(query, "&") {
		if i > 0 {
			emit("&", false)
		}
		k, v, hasV := strings.Cut(kv, "=")
		if !hasV || !SecretName(k) {
			emit(kv, false)
			continue
		}
		emit(k+"=", false)
		emit(v, true)
	}
	if hasFrag {
		emit("#"+frag, false)
	}
}

// dsn masks a key=value connection string (libpq's rules: spaces between
// pairs, optional spaces around '=', a value quoted with ' in which \' and
// \\ stand for ' and \, or unquoted up to a space with \ escaping too).
func dsn(s string, emit func(string, bool)) {
	i := 0
	for i < len(s) {
		// spaces
		j := i
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		// key
		k := j
		for k < len(s) && s[k] != '=' && !isSpace(s[k]) {
			k++
		}
		key := s[j:k]
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		if k >= len(s) || s[k] != '=' {
			// not key=value: the rest is not understood; mask it if it
			// may hold a secret
			emit(s[i:j], false)
			emit(s[j:], SecretName(s[j:]))
			return
		}
		k++ // '='
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		emit(s[i:k], false)
		// value
		v := k
		if v < len(s) && s[v] == '\'' {
			e := v + 1
			closed := false
			for e < len(s) {
				if s[e] == '\\' && e+1 < len(s) {
					e += 2
					continue
				}
				if s[e] == '\'' {
					closed = true
					break
				}
				e++
			}
			if !closed {
				// unterminated: everything after the quote may be the
				// value, and the keys after it too
				emit("'", false)
				emit(s[v+1:], true)
				return
			}
			emit("'", false)
			emit(s[v+1:e], SecretName(key))
			emit("'", false)
			i = e + 1
			continue
		}
		e := v
		for e < len(s) && !isSpace(s[e]) {
			if s[e] == '\\' && e+1 < len(s) {
				e++
			}
			e++
		}
		emit(s[v:e], SecretName(key))
		i = e
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
