package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
)

// Parse parses and validates a YAML config (architecture §9), fills its
// defaults, and expands ${env:NAME} and ${file:PATH} references inside
// string values. It returns every problem found as Errors.
//
// References: ${env:NAME} is the environment variable NAME (unset is an
// error); ${file:PATH} is the content of the file PATH, trailing newlines
// trimmed (unreadable is an error). They are the ways to put a secret into
// a config without writing it in the file; "$${" stands for a literal "${".
// Values are expanded once: text read from a variable or a file is not
// expanded again.
func Parse(data []byte, opts Options) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, Errors{{Path: "(root)", Msg: fmt.Sprintf("the config is %d bytes: at most %d (1 MiB) are read", len(data), MaxConfigBytes)}}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a UTF-8 byte order mark
	if bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		return nil, Errors{{Path: "(root)", Msg: "the file is UTF-16 (it starts with a UTF-16 byte order mark): write it as UTF-8"}}
	}
	root, errs := readYAML(data)
	if errs != nil {
		return nil, errs
	}
	r := &reader{opts: opts.withDefaults(), files: map[string]fileRead{}, origins: map[string]origin{}}
	c := r.config(root)
	decodeErrs := r.errs
	for _, fe := range c.validateShowing(r.origins) {
		if !decodeErrs.covers(fe.Path) {
			r.errs = append(r.errs, fe)
		}
	}
	if len(r.errs) > 0 {
		if n := len(r.errs) + r.dropped - MaxErrors; n > 0 {
			r.errs = append(r.errs[:MaxErrors:MaxErrors], FieldError{Path: "(root)", Msg: fmt.Sprintf("and %d more problems", n)})
		}
		return nil, r.errs
	}
	return c, nil
}

// reader turns the generic YAML tree into a Config, recording problems.
type reader struct {
	opts     Options
	errs     Errors
	dropped  int // problems not kept, past MaxErrors
	refs     int // ${env:} and ${file:} references substituted so far
	refBytes int // the text they substituted
	files    map[string]fileRead
	origins  map[string]origin
}

// fileRead is what reading one ${file:} path gave.
type fileRead struct {
	data []byte
	err  error
}

func (r *reader) fail(path, format string, args ...any) {
	if len(r.errs) >= MaxErrors {
		r.dropped++
		return
	}
	r.errs = append(r.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// quote is how a problem shows the value s read at path: see showValue.
func (r *reader) quote(path, s string) string {
	return showValue(r.origins, path, s)
}

// obj is one YAML mapping being read; end reports the keys nobody asked
// for.
type obj struct {
	r     *reader
	path  string
	items yaml.MapSlice
	used  map[string]bool
	known []string
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object reads v as a mapping; nil (an empty YAML value) is an empty
// mapping. A value of another kind is reported and read as empty.
func (r *reader) object(path string, v any) *obj {
	o := &obj{r: r, path: path, used: map[string]bool{}}
	switch m := v.(type) {
	case nil:
	case yaml.MapSlice:
		o.items = m
	default:
		p := path
		if p == "" {
			p = "(root)"
		}
		r.fail(p, "must be a mapping, not %s", kindOf(v))
	}
	return o
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case yaml.MapSlice:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return "an integer"
}

// get returns the value of key, or false when it is absent or null.
func (o *obj) get(key string) (any, bool) {
	o.known = append(o.known, key)
	o.used[key] = true
	for _, it := range o.items {
		if fmt.Sprint(it.Key) == key {
			return it.Value, it.Value != nil
		}
	}
	return nil, false
}

// has reports whether key is present (even if null).
func (o *obj) has(key string) bool {
	for _, it := range o.items {
		if fmt.Sprint(it.Key) == key {
			return true
		}
	}
	return false
}

func (o *obj) end() {
	for _, it := range o.items {
		k := fmt.Sprint(it.Key)
		if o.used[k] {
			continue
		}
		msg := "unknown field"
		if len(o.r.errs) < MaxErrors { // a dropped problem needs no suggestion
			if s := suggest(k, o.known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		name := cut(k, maxQuote)
		if name == "" {
			name = `""` // an empty key still has a path
		}
		o.r.fail(join(o.path, name), "%s", msg)
	}
}

// suggest returns the known key closest to k, if close enough.
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if d := distance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of two short strings (99 when one
// is longer than 64 bytes).
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	var rows [2][65]int
	prev, cur := rows[0][:len(b)+1], rows[1][:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces ${env:NAME} and ${file:PATH} in s; "$${" is a literal
// "${". Problems are reported at path, never with the values read. A value
// that used a reference is remembered in r.origins, so that problems found
// later describe it by its references instead of quoting it.
func (r *reader) expand(path, s string) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	var from []string
	ok := true
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i]) // the first '$' of "$${" ...
			b.WriteString("{")   // ... and "{": a literal "${"
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			r.fail(path, "unterminated reference %q: want ${env:NAME} or ${file:PATH}", cut(s[i:], maxQuote))
			return "", false
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		kind, arg, _ := strings.Cut(ref, ":")
		var v string
		switch kind {
		case "env":
			if !envNameRE.MatchString(arg) {
				r.fail(path, "${env:%s}: %q is not an environment variable name", cut(arg, maxQuote), cut(arg, maxQuote))
				ok = false
				continue
			}
			val, set := r.opts.LookupEnv(arg)
			if !set {
				r.fail(path, "environment variable %s is not set (referenced as ${env:%s})", arg, arg)
				ok = false
				continue
			}
			v = val
		case "file":
			if arg == "" {
				r.fail(path, "${file:}: empty path")
				ok = false
				continue
			}
			data, err := r.readFile(arg)
			if err != nil {
				a := cut(arg, maxQuote)
				if errors.Is(err, errTooLarge) {
					r.fail(path, "${file:%s}: the file is larger than %d bytes (64 KiB), the most a ${file:} reference reads", a, MaxFileRefBytes)
				} else {
					r.fail(path, "cannot read file %s (referenced as ${file:%s}): %v", a, a, err)
				}
				ok = false
				continue
			}
			v = strings.TrimRight(string(data), "\r\n")
		default:
			r.fail(path, "unknown reference ${%s}: want ${env:NAME} or ${file:PATH} (write $${ for a literal ${)", cut(ref, maxQuote))
			ok = false
			continue
		}
		r.refBytes += len(v)
		if r.refBytes > MaxRefBytes {
			r.fail(path, "references substitute more than %d bytes (1 MiB) in all: too much for a config", MaxRefBytes)
			return "", false
		}
		b.WriteString(v)
		r.refs++
		from = append(from, "${"+cut(ref, maxQuote)+"}")
	}
	out := b.String()
	if len(from) > 0 {
		r.origins[path] = origin{value: out, from: "the value from " + strings.Join(from, ", ")}
	}
	return out, ok
}

// readFile reads a ${file:} path once per Parse, through Options.ReadFile,
// and refuses more than MaxFileRefBytes.
func (r *reader) readFile(path string) ([]byte, error) {
	if f, ok := r.files[path]; ok {
		return f.data, f.err
	}
	data, err := r.opts.ReadFile(path)
	if err == nil && len(data) > MaxFileRefBytes {
		data, err = nil, errTooLarge
	}
	r.files[path] = fileRead{data, err}
	return data, err
}
