package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/drover-dev/drover/internal/redact"
)

// The one reader of every section: fill walks a struct's fields by their
// yaml tags (Config's own sections and each adapter's Config alike), so
// that a setting is described once, by its field. A field's Go type says
// how its value is read (Secret and SecretURL by the secret rules); a
// struct, or a pointer to one, is a nested section, read when its key is
// present (even null); a slice of structs is a list of sections
// (sources). Keys no field names are unknown fields. Defaults are set
// before a section is read (setDefaults) and what depends on other fields
// after (finish), both in defaults.go.

// config reads the whole document.
func (r *reader) config(root any) *Config {
	c := defaultConfig()
	r.fill("", root, reflect.ValueOf(c).Elem())
	return c
}

// fill reads the mapping v at path into the struct dst (addressable).
func (r *reader) fill(path string, v any, dst reflect.Value) {
	o := r.object(path, v)
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		if key := yamlName(t.Field(i)); key != "" {
			r.field(o, key, dst.Field(i))
		}
	}
	o.end()
	r.finish(o, dst.Addr().Interface())
}

// yamlName is the key of a struct field, "" for a field the file does not
// set (no yaml tag, or "-").
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// field reads key of o into dst by dst's type.
func (r *reader) field(o *obj, key string, dst reflect.Value) {
	switch p := dst.Addr().Interface().(type) {
	case *Secret:
		o.secret(key, p)
		return
	case *SecretURL:
		o.secretURL(key, p)
		return
	case *time.Duration:
		o.dur(key, p)
		return
	case *[]string:
		o.strs(key, p)
		return
	}
	switch dst.Kind() {
	case reflect.String:
		s := dst.String()
		o.str(key, &s)
		dst.SetString(s)
		return
	case reflect.Bool:
		b := dst.Bool()
		o.bool(key, &b)
		dst.SetBool(b)
		return
	case reflect.Float64:
		f := dst.Float()
		o.float(key, &f)
		dst.SetFloat(f)
		return
	case reflect.Int, reflect.Int32:
		n := int(dst.Int())
		o.int(key, &n) // every integer is read within int32
		dst.SetInt(int64(n))
		return
	}
	present := o.has(key)
	v, _ := o.get(key)
	path := join(o.path, key)
	switch {
	case dst.Kind() == reflect.Struct:
		if present {
			r.fill(path, v, dst)
		}
	case dst.Kind() == reflect.Pointer && dst.Type().Elem().Kind() == reflect.Struct:
		if present {
			sec := reflect.New(dst.Type().Elem())
			setDefaults(sec.Interface())
			r.fill(path, v, sec.Elem())
			dst.Set(sec)
		}
	case dst.Kind() == reflect.Slice && dst.Type().Elem().Kind() == reflect.Struct:
		r.list(path, v, dst)
	default:
		panic(fmt.Sprintf("config: field %s of type %s has no reader", path, dst.Type()))
	}
}

// list reads a list of sections (sources), at most MaxSources.
func (r *reader) list(path string, v any, dst reflect.Value) {
	if v == nil {
		return
	}
	list, isList := v.([]any)
	switch {
	case !isList:
		r.fail(path, "must be a list, not %s", kindOf(v))
	case len(list) > MaxSources:
		r.fail(path, "%d sources: at most %d on one node", len(list), MaxSources)
		list = nil
	}
	for i, e := range list {
		el := reflect.New(dst.Type().Elem())
		setDefaults(el.Interface())
		r.fill(fmt.Sprintf("%s[%d]", path, i), e, el.Elem())
		dst.Set(reflect.Append(dst, el.Elem()))
	}
}

// scalar returns v as text: strings expanded, numbers and booleans as
// YAML wrote them (as far as the YAML library tells).
func (r *reader) scalar(path string, v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return r.expand(path, x)
	case bool:
		return strconv.FormatBool(x), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	r.fail(path, "must be a single value, not %s", kindOf(v))
	return "", false
}

func (o *obj) str(key string, dst *string) {
	if v, ok := o.get(key); ok {
		if s, ok := o.r.scalar(join(o.path, key), v); ok {
			*dst = s
		}
	}
}

// secret reads a secret field: architecture §9 makes ${env:NAME} and
// ${file:PATH} the only ways to put a secret in a config, so a value that
// holds no reference is an error (it would sit in a file that gets copied,
// committed and shown). The value is still read, so other checks run.
func (o *obj) secret(key string, dst *Secret) {
	before := o.r.refs
	var s string
	o.str(key, &s)
	if s == "" {
		return
	}
	if o.r.refs == before {
		o.r.fail(join(o.path, key), "a secret must come from ${env:NAME} or ${file:PATH}, not be written in the file")
	}
	*dst = Secret(s)
}

// secretURL reads a URL that may carry a password (store.url, nats.url): a
// password written in the file itself is an error, by the same rule as
// secrets — in the user info, in a ?password= (or other secret) query
// parameter, in a key=value DSN's password=, and a user name alone in a
// nats:// URL, which NATS takes for a token (see internal/redact). A URL
// without one, or whose secret parts are references, is fine.
func (o *obj) secretURL(key string, dst *SecretURL) {
	v, _ := o.get(key)
	raw, _ := v.(string)
	var s string
	o.str(key, &s)
	if s == "" {
		return
	}
	// references become a mark without the characters URLs are cut at
	marked := refRE.ReplaceAllString(strings.ReplaceAll(raw, "$${", "\x02{"), "\x01")
	for _, p := range redact.Secrets(marked) {
		if !strings.Contains(p, "\x01") {
			o.r.fail(join(o.path, key), "the password must come from ${env:NAME} or ${file:PATH}, not be written in the file "+
				"(e.g. url: ${env:DROVER_STORE_URL}); a user name alone in a nats:// URL is a token, a secret too")
			break
		}
	}
	*dst = SecretURL(s)
}

// refRE finds a reference in raw text whose "$${" were replaced.
var refRE = regexp.MustCompile(`\$\{(env|file):[^}]*\}`)

// readScalar reads key into dst: a YAML value native takes as it is (or
// names a problem with), or a string, after its references are expanded,
// that parse reads. Anything else is "must be WHAT, not …", quoting the
// string as quote allows or naming the YAML kind.
func readScalar[T any](o *obj, key string, dst *T, what string, native func(v any) (val T, problem string, ok bool), parse func(s string) (T, bool)) {
	v, found := o.get(key)
	if !found {
		return
	}
	path := join(o.path, key)
	if x, isString := v.(string); isString {
		s, ok := o.r.expand(path, x)
		if !ok {
			return
		}
		if val, ok := parse(s); ok {
			*dst = val
			return
		}
		o.r.fail(path, "must be %s, not %s", what, o.r.quote(path, s))
		return
	}
	val, problem, ok := native(v)
	switch {
	case problem != "":
		o.r.fail(path, "%s", problem)
	case ok:
		*dst = val
	default:
		o.r.fail(path, "must be %s, not %s", what, kindOf(v))
	}
}

func (o *obj) int(key string, dst *int) {
	readScalar(o, key, dst, "an integer", func(v any) (int, string, bool) {
		switch x := v.(type) {
		case uint64:
			if x > math.MaxInt32 {
				return 0, fmt.Sprintf("%d is too large", x), false
			}
			return int(x), "", true
		case int64:
			if x < math.MinInt32 {
				return 0, fmt.Sprintf("%d is too small", x), false
			}
			return int(x), "", true
		}
		return 0, "", false
	}, func(s string) (int, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		return int(n), err == nil
	})
}

func (o *obj) float(key string, dst *float64) {
	readScalar(o, key, dst, "a number", func(v any) (float64, string, bool) {
		switch x := v.(type) {
		case uint64:
			return float64(x), "", true
		case int64:
			return float64(x), "", true
		case float64:
			return x, "", true
		}
		return 0, "", false
	}, func(s string) (float64, bool) {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return f, err == nil
	})
}

func (o *obj) bool(key string, dst *bool) {
	readScalar(o, key, dst, "true or false", func(v any) (bool, string, bool) {
		b, ok := v.(bool)
		return b, "", ok
	}, func(s string) (bool, bool) {
		switch s {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		return false, false
	})
}

func (o *obj) dur(key string, dst *time.Duration) {
	readScalar(o, key, dst, "a duration such as 500ms, 10s or 1h30m", func(v any) (time.Duration, string, bool) {
		x, ok := v.(uint64)
		return 0, "", ok && x == 0 // a bare 0 is the one number that is a duration
	}, func(s string) (time.Duration, bool) {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		return d, err == nil
	})
}

// strs reads a list of single values.
func (o *obj) strs(key string, dst *[]string) {
	v, ok := o.get(key)
	if !ok {
		return
	}
	path := join(o.path, key)
	list, ok := v.([]any)
	if !ok {
		o.r.fail(path, "must be a list, not %s", kindOf(v))
		return
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		// goccy/go-yaml v1.19.2 reads the 127.0.0.1:9092 of a flow list
		// nested in a flow mapping ({brokers: [127.0.0.1:9092]}, as
		// architecture §9 writes it) as a one-pair mapping: put it back.
		if m, ok := e.(yaml.MapSlice); ok && len(m) == 1 {
			switch m[0].Value.(type) {
			case uint64, int64, string:
				if _, ok := m[0].Key.(string); ok {
					e = fmt.Sprint(m[0].Key) + ":" + fmt.Sprint(m[0].Value)
				}
			}
		}
		if s, ok := o.r.scalar(fmt.Sprintf("%s[%d]", path, i), e); ok {
			out = append(out, s)
		}
	}
	*dst = out
}
