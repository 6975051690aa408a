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
package redact

import (
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

// Scrub replaces every occurrence of each secret in text by Mask, longest
// first.
func Scrub(text string, secrets ...string) string {
	ss := append([]string(nil), secrets...)
	// longest first, so that a secret holding another is replaced whole
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && len(ss[j]) > len(ss[j-1]); j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
	for _, s := range ss {
		if s != "" {
			text = strings.ReplaceAll(text, s, Mask)
		}
	}
	return text
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
	for s != "" {
		end := len(s)
		if loc := listSplit.FindStringIndex(s); loc != nil {
			end = loc[0]
		}
		one(s[:end], emit)
		if end == len(s) {
			return
		}
		emit(",", false)
		s = s[end+1:]
	}
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
