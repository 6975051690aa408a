package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/drover-dev/drover/internal/redact"
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

func (o *obj) int(key string, dst *int) {
	v, ok := o.get(key)
	if !ok {
		return
	}
	path := join(o.path, key)
	switch x := v.(type) {
	case uint64:
		if x > math.MaxInt32 {
			o.r.fail(path, "%d is too large", x)
			return
		}
		*dst = int(x)
		return
	case int64:
		if x < math.MinInt32 {
			o.r.fail(path, "%d is too small", x)
			return
		}
		*dst = int(x)
		return
	case string:
		s, ok := o.r.expand(path, x)
		if !ok {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			o.r.fail(path, "must be an integer, not %s", o.r.quote(path, s))
			return
		}
		*dst = int(n)
		return
	}
	o.r.fail(path, "must be an integer, not %s", kindOf(v))
}

func (o *obj) float(key string, dst *float64) {
	v, ok := o.get(key)
	if !ok {
		return
	}
	path := join(o.path, key)
	switch x := v.(type) {
	case uint64:
		*dst = float64(x)
		return
	case int64:
		*dst = float64(x)
		return
	case float64:
		*dst = x
		return
	case string:
		s, ok := o.r.expand(path, x)
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			o.r.fail(path, "must be a number, not %s", o.r.quote(path, s))
			return
		}
		*dst = f
		return
	}
	o.r.fail(path, "must be a number, not %s", kindOf(v))
}

func (o *obj) bool(key string, dst *bool) {
	v, ok := o.get(key)
	if !ok {
		return
	}
	path := join(o.path, key)
	switch x := v.(type) {
	case bool:
		*dst = x
		return
	case string:
		s, ok := o.r.expand(path, x)
		if !ok {
			return
		}
		switch s {
		case "true":
			*dst = true
			return
		case "false":
			*dst = false
			return
		}
		o.r.fail(path, "must be true or false, not %s", o.r.quote(path, s))
		return
	}
	o.r.fail(path, "must be true or false, not %s", kindOf(v))
}

func (o *obj) dur(key string, dst *time.Duration) {
	v, ok := o.get(key)
	if !ok {
		return
	}
	path := join(o.path, key)
	switch x := v.(type) {
	case uint64:
		if x == 0 {
			*dst = 0
			return
		}
	case int64:
	case string:
		s, ok := o.r.expand(path, x)
		if !ok {
			return
		}
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			o.r.fail(path, "must be a duration such as 500ms, 10s or 1h30m, not %s", o.r.quote(path, s))
			return
		}
		*dst = d
		return
	}
	o.r.fail(path, "must be a duration such as 500ms, 10s or 1h30m, not %s", kindOf(v))
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

// section reads a nested mapping when key is present (even if null).
func (o *obj) section(key string) (*obj, bool) {
	present := o.has(key)
	v, _ := o.get(key)
	if !present {
		return nil, false
	}
	return o.r.object(join(o.path, key), v), true
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

// config reads the whole document.
func (r *reader) config(root any) *Config {
	c := &Config{
		Node:    Node{DebugAddr: DefaultDebugAddr, Capacity: 1},
		Cluster: Cluster{Bind: DefaultBind, Profile: "default", MaxCapacity: DefaultMaxCapacity},
		Store:   Store{URL: DefaultStoreURL, DedupeRetention: DefaultDedupeRetention, Timeout: DefaultStoreTimeout},
		Log:     Log{Format: "text", Level: "info"},
	}
	top := r.object("", root)
	if n, ok := top.section("node"); ok {
		n.str("name", &c.Node.Name)
		n.str("debug_addr", &c.Node.DebugAddr)
		n.secret("debug_token", &c.Node.DebugToken)
		n.float("capacity", &c.Node.Capacity)
		if t, ok := n.section("debug_tls"); ok {
			t.str("cert", &c.Node.DebugTLS.Cert)
			t.str("key", &c.Node.DebugTLS.Key)
			t.str("ca", &c.Node.DebugTLS.CA)
			t.end()
		}
		n.end()
	}
	if c.Node.Name == "" && !r.errs.covers("node.name") {
		h, err := r.opts.Hostname()
		if err != nil {
			r.fail("node.name", "required: the hostname is not available (%v)", err)
		}
		c.Node.Name = h
	}
	if cl, ok := top.section("cluster"); ok {
		cl.str("bind", &c.Cluster.Bind)
		cl.str("advertise", &c.Cluster.Advertise)
		cl.strs("join", &c.Cluster.Join)
		cl.str("profile", &c.Cluster.Profile)
		cl.secret("secret_key", &c.Cluster.SecretKey)
		cl.float("max_capacity", &c.Cluster.MaxCapacity)
		cl.end()
		c.warnings = append(c.warnings, c.Cluster.warnings()...)
	}
	if st, ok := top.section("store"); ok {
		st.secretURL("url", &c.Store.URL)
		st.dur("dedupe_retention", &c.Store.DedupeRetention)
		st.dur("timeout", &c.Store.Timeout)
		st.int("max_conns", &c.Store.MaxConns)
		st.end()
	}
	if l, ok := top.section("log"); ok {
		l.str("format", &c.Log.Format)
		l.str("level", &c.Log.Level)
		l.end()
	}
	if v, ok := top.get("sources"); ok {
		list, isList := v.([]any)
		switch {
		case !isList:
			r.fail("sources", "must be a list, not %s", kindOf(v))
		case len(list) > MaxSources:
			r.fail("sources", "%d sources: at most %d on one node", len(list), MaxSources)
			list = nil
		}
		for i, e := range list {
			c.Sources = append(c.Sources, r.source(fmt.Sprintf("sources[%d]", i), e))
		}
	}
	top.end()
	return c
}

func (r *reader) source(path string, v any) Source {
	s := Source{
		Start: "earliest", OnPositionReset: "earliest", Mode: "records", BatchSize: DefaultBatchSize, MaxWait: DefaultMaxWait,
		MaxConsecutiveFailures: DefaultMaxConsecutiveFailures, Slots: DefaultSlots,
		MaxMessageBytes: DefaultMaxMessageBytes, LeaseTTL: DefaultLeaseTTL, DiscoveryInterval: DefaultDiscoveryInterval,
		BatchBytes: DefaultBatchBytes, DeadLetterMaxBytes: DefaultDeadLetterMaxBytes,
	}
	o := r.object(path, v)
	o.str("name", &s.Name)
	o.str("type", &s.Type)
	o.str("start", &s.Start)
	o.str("on_position_reset", &s.OnPositionReset)
	o.str("mode", &s.Mode)
	o.str("handler_name", &s.HandlerName)
	if rec, ok := o.section("records"); ok {
		rec.str("table", &s.Records.Table)
		rec.str("key", &s.Records.Key)
		rec.str("schema", &s.Records.Schema)
		rec.end()
		s.Records.Table = strings.TrimSpace(s.Records.Table)
	}
	o.int("batch_size", &s.BatchSize)
	o.dur("max_wait", &s.MaxWait)
	o.int("max_consecutive_failures", &s.MaxConsecutiveFailures)
	o.int("slots", &s.Slots)
	o.int("max_message_bytes", &s.MaxMessageBytes)
	o.int("batch_bytes", &s.BatchBytes)
	o.int("dead_letter_max_bytes", &s.DeadLetterMaxBytes)
	o.dur("lease_ttl", &s.LeaseTTL)
	o.dur("discovery_interval", &s.DiscoveryInterval)

	if k, ok := o.section("kafka"); ok {
		s.Kafka = &Kafka{}
		k.strs("brokers", &s.Kafka.Brokers)
		k.str("topic", &s.Kafka.Topic)
		k.str("client_id", &s.Kafka.ClientID)
		if t, ok := k.section("tls"); ok {
			s.Kafka.TLS = &TLS{}
			t.bool("enabled", &s.Kafka.TLS.Enabled)
			t.str("ca_file", &s.Kafka.TLS.CAFile)
			t.str("cert_file", &s.Kafka.TLS.CertFile)
			t.str("key_file", &s.Kafka.TLS.KeyFile)
			t.bool("insecure_skip_verify", &s.Kafka.TLS.InsecureSkipVerify)
			t.end()
		}
		if sa, ok := k.section("sasl"); ok {
			s.Kafka.SASL = &SASL{}
			sa.str("mechanism", &s.Kafka.SASL.Mechanism)
			sa.str("username", &s.Kafka.SASL.Username)
			sa.secret("password", &s.Kafka.SASL.Password)
			sa.end()
		}
		k.int("fetch_max_bytes", &s.Kafka.FetchMaxBytes)
		k.str("commit_to_group", &s.Kafka.CommitToGroup)
		k.str("isolation", &s.Kafka.Isolation)
		k.end()
	}
	if k, ok := o.section("kinesis"); ok {
		s.Kinesis = &Kinesis{}
		k.str("stream", &s.Kinesis.Stream)
		k.str("region", &s.Kinesis.Region)
		k.str("endpoint", &s.Kinesis.Endpoint)
		k.str("access_key_id", &s.Kinesis.AccessKeyID)
		k.secret("secret_access_key", &s.Kinesis.SecretAccessKey)
		k.end()
	}
	if q, ok := o.section("sqs"); ok {
		s.SQS = &SQS{Wait: DefaultSQSWait, VisibilityTimeout: DefaultSQSVisibilityTimeout}
		q.str("queue_url", &s.SQS.QueueURL)
		q.str("region", &s.SQS.Region)
		q.str("endpoint", &s.SQS.Endpoint)
		q.dur("wait", &s.SQS.Wait)
		q.dur("visibility_timeout", &s.SQS.VisibilityTimeout)
		q.str("access_key_id", &s.SQS.AccessKeyID)
		q.secret("secret_access_key", &s.SQS.SecretAccessKey)
		q.end()
	}
	if p, ok := o.section("pubsub"); ok {
		s.PubSub = &PubSub{}
		p.str("project", &s.PubSub.Project)
		p.str("subscription", &s.PubSub.Subscription)
		p.str("endpoint", &s.PubSub.Endpoint)
		p.str("credentials_file", &s.PubSub.CredentialsFile)
		p.int("max_outstanding", &s.PubSub.MaxOutstanding)
		p.end()
	}
	if n, ok := o.section("nats"); ok {
		s.NATS = &NATS{Mode: NATSQueue}
		n.secretURL("url", &s.NATS.URL)
		n.str("stream", &s.NATS.Stream)
		n.str("subject", &s.NATS.Subject)
		n.str("mode", &s.NATS.Mode)
		n.str("consumer", &s.NATS.Consumer)
		n.dur("ack_wait", &s.NATS.AckWait)
		n.int("max_ack_pending", &s.NATS.MaxAckPending)
		n.str("credentials_file", &s.NATS.CredentialsFile)
		n.str("user", &s.NATS.User)
		n.secret("password", &s.NATS.Password)
		n.end()
		if s.NATS.Mode == NATSQueue && s.NATS.Consumer == "" && s.Name != "" {
			s.NATS.Consumer = "drover-" + s.Name
		}
	}
	if m, ok := o.section("memory"); ok {
		s.Memory = &Memory{}
		m.int("partitions", &s.Memory.Partitions)
		m.bool("queue", &s.Memory.Queue)
		m.end()
		if !s.Memory.Queue && s.Memory.Partitions == 0 && !m.has("partitions") {
			s.Memory.Partitions = 1
		}
	}
	o.end()

	if s.Mode == "records" && s.Records.Table == "" && s.Name != "" {
		s.Records.Table = strings.ReplaceAll(s.Name, "-", "_")
	}
	return s
}
