package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/postgres"
	"github.com/drover-dev/drover/persistence/sqlite"
)

var (
	nodeNameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	sourceNameRE  = regexp.MustCompile(`^[a-z0-9_-]+$`)
	handlerNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// Validate checks a Config whose defaults are filled (Parse does both) and
// returns Errors, or nil. It also sets each source's Records.Declared from
// its Records.Schema.
func (c *Config) Validate() error {
	if errs := c.validate(); len(errs) > 0 {
		return errs
	}
	return nil
}

// Warnings are what Parse found valid but dubious, each with the path of
// its field; `drover check` prints them and still exits 0. Today: a
// cluster section whose join list is empty, or names only this node.
func (c *Config) Warnings() []FieldError {
	return append([]FieldError(nil), c.warnings...)
}

// warnings of a cluster section (a config with one is meant for a
// cluster of several nodes).
func (c Cluster) warnings() []FieldError {
	others := 0
	for _, j := range c.Join {
		if j != c.Bind && j != c.Advertise {
			others++
		}
	}
	if others > 0 {
		return nil
	}
	what := "empty"
	if len(c.Join) > 0 {
		what = "lists only this node"
	}
	return []FieldError{{Path: "cluster.join", Msg: what + ": a node restarted with an empty join list forms a cluster of its own " +
		"until the others reach it; list every seed (every node's cluster address, this one's included) on every node"}}
}

type checker struct {
	errs    Errors
	origins map[string]origin // the fields whose value came through a reference
}

// fail records a problem; its arguments are shown as showArg says (a
// value that came through a reference, or a long one, is not quoted).
func (v *checker) fail(path, format string, args ...any) {
	for i, a := range args {
		args[i] = showArg(v.origins, path, a)
	}
	v.errs = append(v.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *checker) oneOf(path, val string, choices ...string) {
	for _, c := range choices {
		if val == c {
			return
		}
	}
	if val == "" {
		v.fail(path, "required: one of %s", strings.Join(choices, ", "))
		return
	}
	v.fail(path, "must be one of %s, not %q", strings.Join(choices, ", "), val)
}

func (v *checker) required(path, val string) bool {
	if strings.TrimSpace(val) == "" {
		v.fail(path, "required")
		return false
	}
	return true
}

func (v *checker) between(path string, n, lo, hi int) {
	if n < lo || n > hi {
		v.fail(path, "must be between %d and %d, not %d", lo, hi, n)
	}
}

func (v *checker) durBetween(path string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.fail(path, "must be between %v and %v, not %v", lo, hi, d)
	}
}

// addr checks host:port. needHost: the host may not be empty (an address
// to connect to rather than to listen on).
func (v *checker) addr(path, s string, needHost bool) (host string, ok bool) {
	if strings.Contains(s, "://") {
		v.fail(path, "%q must be host:port, without a URL scheme", s)
		return "", false
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		v.fail(path, "%q must be host:port", s)
		return "", false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 || (needHost && port == 0) {
		v.fail(path, "%q: port %q must be a number from 1 to 65535", s, p)
		return "", false
	}
	if needHost && h == "" {
		v.fail(path, "%q: host is missing", s)
		return "", false
	}
	if strings.ContainsAny(h, " /@?#") {
		v.fail(path, "%q: %q is not a host name or IP address", s, h)
		return "", false
	}
	return h, true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Config) validate() Errors { return c.validateShowing(nil) }

// validateShowing is validate, its problems showing the values of origins'
// fields by their references (Parse's reader knows them).
func (c *Config) validateShowing(origins map[string]origin) Errors {
	v := &checker{origins: origins}
	// node
	switch {
	case c.Node.Name == "":
		v.fail("node.name", "required")
	case !nodeNameRE.MatchString(c.Node.Name):
		v.fail("node.name", "%q must be letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)", c.Node.Name)
	}
	if host, ok := v.addr("node.debug_addr", c.Node.DebugAddr, false); ok && !isLoopback(host) && c.Node.DebugToken == "" {
		v.fail("node.debug_token", "required when node.debug_addr (%s) is not a loopback address", c.Node.DebugAddr)
	}
	// node.capacity is at most cluster.max_capacity (checked below), or
	// at most placement.MaxCapacity while that one is out of range.
	maxCapOK := c.Cluster.MaxCapacity > 0 && c.Cluster.MaxCapacity <= placement.MaxCapacity
	capLimit, capWhat := float64(placement.MaxCapacity), strconv.Itoa(placement.MaxCapacity)
	if maxCapOK {
		capLimit, capWhat = c.Cluster.MaxCapacity, fmt.Sprintf("cluster.max_capacity (%v)", c.Cluster.MaxCapacity)
	}
	if !(c.Node.Capacity > 0) || c.Node.Capacity > capLimit {
		hint := ""
		if maxCapOK && c.Node.Capacity > capLimit && c.Node.Capacity <= float64(placement.MaxCapacity) {
			hint = " (or raise cluster.max_capacity, to the same value on every node)"
		}
		v.fail("node.capacity", "must be a number above 0 and at most %s, not %v%s", capWhat, c.Node.Capacity, hint)
	}
	v.debugTLS("node.debug_tls", c.Node.DebugTLS)
	v.durBetween("node.seek_expiry", c.Node.SeekExpiry, 10*time.Second, 24*time.Hour)
	v.oneOf("node.gc_tuning", c.Node.GCTuning, "adaptive", "off")

	// cluster
	bindHost, bindOK := v.addr("cluster.bind", c.Cluster.Bind, false)
	public := ""
	if bindOK && !isLoopback(bindHost) {
		public = "cluster.bind (" + c.Cluster.Bind + ")"
	}
	if c.Cluster.Advertise != "" {
		if h, ok := v.addr("cluster.advertise", c.Cluster.Advertise, true); ok && !isLoopback(h) && public == "" {
			public = "cluster.advertise (" + c.Cluster.Advertise + ")"
		}
	}
	if public != "" && c.Cluster.SecretKey == "" {
		v.fail("cluster.secret_key", "required when %s is not a loopback address: without it anyone who reaches the gossip port can join the cluster and be given units", public)
	}
	for i, j := range c.Cluster.Join {
		v.addr(fmt.Sprintf("cluster.join[%d]", i), j, true)
	}
	v.oneOf("cluster.profile", c.Cluster.Profile, "default", "fast")
	if !maxCapOK {
		v.fail("cluster.max_capacity", "must be a number above 0 and at most %d, not %v", placement.MaxCapacity, c.Cluster.MaxCapacity)
	}
	if c.Cluster.SecretKey != "" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.Cluster.SecretKey.Reveal()))
		switch {
		case err != nil:
			v.fail("cluster.secret_key", "must be base64 of exactly 32 bytes: not valid base64")
		case len(b) != 32:
			v.fail("cluster.secret_key", "must be base64 of exactly 32 bytes, not %d bytes", len(b))
		}
	}

	// store
	u := c.Store.URL.Reveal()
	switch {
	case u == "":
		v.fail("store.url", "required")
	case strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://"):
		if err := redact.CheckAt(u); err != nil {
			v.fail("store.url", "%v", err)
		} else if pu, err := url.Parse(u); err != nil || pu.Host == "" {
			v.fail("store.url", "%s: a postgres URL needs a host: postgres://user@host:5432/db", c.Store.URL)
		}
	case strings.HasPrefix(u, "sqlite:"):
		if strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//") == "" {
			v.fail("store.url", "%s: a sqlite URL needs a path: sqlite:./drover.db or sqlite:///var/lib/drover/drover.db", c.Store.URL)
		}
	default:
		v.fail("store.url", "%s: must start with postgres://, postgresql:// or sqlite:", c.Store.URL)
	}
	if c.Store.DedupeRetention <= 0 {
		v.fail("store.dedupe_retention", "must be positive, not %v", c.Store.DedupeRetention)
	}
	if c.Store.Timeout < MinStoreTimeout {
		v.fail("store.timeout", "must be at least %v, not %v", MinStoreTimeout, c.Store.Timeout)
	}
	if c.Store.MaxConns < 0 {
		v.fail("store.max_conns", "must not be negative, not %d", c.Store.MaxConns)
	}

	// log
	v.oneOf("log.format", c.Log.Format, "text", "json")
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")

	// sources
	if len(c.Sources) == 0 {
		v.fail("sources", "required: at least one source")
	}
	names := map[string]int{}
	for i := range c.Sources {
		p := fmt.Sprintf("sources[%d]", i)
		s := &c.Sources[i]
		if s.Name != "" && sourceNameRE.MatchString(s.Name) {
			if j, dup := names[s.Name]; dup {
				v.fail(p+".name", "%q is already the name of sources[%d]", s.Name, j)
			} else {
				names[s.Name] = i
			}
		}
		v.source(p, s)
		v.storeLimits(p, s, u)
	}
	v.tablesDifferInCase(c.Sources)
	return v.errs
}

// tablesDifferInCase refuses two sources whose records tables differ only
// in case: SQLite folds case (one table for both), PostgreSQL does not (two
// tables), so the same config would mean different things per store.
func (v *checker) tablesDifferInCase(srcs []Source) {
	first := map[string]int{} // lower-case table -> index of its first source
	for i, s := range srcs {
		if s.Mode != "records" || s.Records.Table == "" {
			continue
		}
		low := strings.ToLower(s.Records.Table)
		j, seen := first[low]
		if !seen {
			first[low] = i
			continue
		}
		if other := srcs[j].Records.Table; other != s.Records.Table {
			v.fail(fmt.Sprintf("sources[%d].records.table", i), "%q and sources[%d].records.table %q differ only in case: "+
				"SQLite keeps them in one table, PostgreSQL in two; spell them alike", s.Records.Table, j, other)
		}
	}
}

var sections = []string{TypeKafka, TypeKinesis, TypeSQS, TypePubSub, TypeNATS, TypeMemory}

func (s *Source) present(typ string) bool {
	switch typ {
	case TypeKafka:
		return s.Kafka != nil
	case TypeKinesis:
		return s.Kinesis != nil
	case TypeSQS:
		return s.SQS != nil
	case TypePubSub:
		return s.PubSub != nil
	case TypeNATS:
		return s.NATS != nil
	case TypeMemory:
		return s.Memory != nil
	}
	return false
}

func (v *checker) source(p string, s *Source) {
	switch {
	case s.Name == "":
		v.fail(p+".name", "required")
	case !sourceNameRE.MatchString(s.Name):
		v.fail(p+".name", "%q must be lower-case letters, digits, '_' or '-'", s.Name)
	}
	v.oneOf(p+".type", s.Type, sections...)
	for _, sec := range sections {
		switch {
		case sec == s.Type && !s.present(sec):
			v.fail(p+"."+sec, "required for type %s", sec)
		case sec != s.Type && s.present(sec):
			v.fail(p+"."+sec, "not allowed with type %q: a source has only the section of its type", s.Type)
		}
	}
	v.oneOf(p+".start", s.Start, "earliest", "latest")
	v.oneOf(p+".on_position_reset", s.OnPositionReset, "earliest", "latest", "fail")
	v.oneOf(p+".mode", s.Mode, "records", "handler")
	switch s.Mode {
	case "handler":
		switch {
		case s.HandlerName == "":
			v.fail(p+".handler_name", "required with mode: handler (the name the handler was registered under)")
		case !handlerNameRE.MatchString(s.HandlerName):
			v.fail(p+".handler_name", "%q must be letters, digits, '.', '_' or '-'", s.HandlerName)
		}
		if s.Records.Table != "" || s.Records.Key != "" || s.Records.Schema != "" {
			v.fail(p+".records", "only valid with mode: records")
		}
	case "records":
		if s.HandlerName != "" {
			v.fail(p+".handler_name", "only valid with mode: handler")
		}
		if err := persistence.ValidTable(s.Records.Table); err != nil && (s.Name != "" || s.Records.Table != "") {
			if s.Records.Table == strings.ReplaceAll(s.Name, "-", "_") {
				v.fail(p+".records.table", "the default from the source name is not valid (%v): set records.table", err)
			} else {
				v.fail(p+".records.table", "%v", err)
			}
		}
		if err := (decode.Config{KeyField: s.Records.Key}).Validate(); err != nil {
			v.fail(p+".records.key", "%q: a dotted path with no empty segment, such as id or customer.id", s.Records.Key)
		}
		if s.Records.Schema != "" {
			sc, err := quality.ParseSchema(s.Records.Schema)
			if err != nil {
				v.fail(p+".records.schema", "%v", err)
			}
			s.Records.Declared = sc
		}
	}
	v.decoding(p+".decode", s)
	v.between(p+".batch_size", s.BatchSize, 1, 10000)
	v.durBetween(p+".max_wait", s.MaxWait, time.Millisecond, time.Hour)
	v.between(p+".max_consecutive_failures", s.MaxConsecutiveFailures, 1, 1000)
	v.between(p+".max_message_bytes", s.MaxMessageBytes, 1, 1<<30)
	v.batchBytes(p, s)
	v.durBetween(p+".lease_ttl", s.LeaseTTL, time.Second, time.Hour)
	if s.LeaseTTL <= s.MaxWait && s.MaxWait >= time.Millisecond && s.LeaseTTL >= time.Second {
		v.fail(p+".lease_ttl", "must be longer than max_wait (%v), or the lease lapses while a fetch waits", s.MaxWait)
	}
	v.durBetween(p+".discovery_interval", s.DiscoveryInterval, time.Second, 24*time.Hour)
	if s.IsQueue() {
		v.between(p+".slots", s.Slots, 1, 256)
	} else if s.Slots != DefaultSlots && s.Type != "" {
		v.fail(p+".slots", "only valid for queue sources (sqs, pubsub, nats in queue mode, memory with queue: true)")
	}

	if k := s.Kafka; k != nil {
		v.adapter(p+".kafka", k, k.Validate())
	}
	if n := s.NATS; n != nil {
		v.adapter(p+".nats", n, n.Validate())
	}
	if sq := s.SQS; sq != nil {
		var own []brokers.FieldError
		if strings.TrimSpace(sq.Region) == "" {
			own = append(own, brokers.FieldError{Path: "region", Msg: "required"})
		}
		v.adapter(p+".sqs", sq, sq.Validate(), own...)
	}
	if k := s.Kinesis; k != nil {
		var own []brokers.FieldError
		if strings.TrimSpace(k.Region) == "" {
			own = append(own, brokers.FieldError{Path: "region", Msg: "required"})
		}
		v.adapter(p+".kinesis", k, k.Validate(), own...)
	}
	if ps := s.PubSub; ps != nil {
		// the file's own rules: a project, and a subscription ID (the
		// adapter also takes a full path and finds the project in it)
		var own []brokers.FieldError
		for _, f := range []struct{ name, val string }{{"project", ps.Project}, {"subscription", ps.Subscription}} {
			if strings.TrimSpace(f.val) == "" {
				own = append(own, brokers.FieldError{Path: f.name, Msg: "required"})
			}
			if strings.ContainsAny(f.val, " \t/") {
				own = append(own, brokers.FieldError{Path: f.name, Msg: fmt.Sprintf("%q must be an id, without spaces or '/'", f.val)})
			}
		}
		v.adapter(p+".pubsub", ps, ps.Validate(), own...)
	}
	if m := s.Memory; m != nil {
		q := p + ".memory"
		switch {
		case m.Queue && m.Partitions != 0:
			v.fail(q+".partitions", "not allowed with queue: true (a memory source is a stream of partitions or a queue)")
		case !m.Queue:
			v.between(q+".partitions", m.Partitions, 1, 1024)
		}
	}
}

// debugTLS checks node.debug_tls: cert and key together, each a path. A
// value that is PEM content (a ${file:} reference would put it there) is
// refused without being quoted: it may be the private key.
func (v *checker) debugTLS(p string, t DebugTLS) {
	for _, f := range []struct{ name, val string }{{"cert", t.Cert}, {"key", t.Key}, {"ca", t.CA}} {
		if strings.Contains(f.val, "-----BEGIN") || strings.ContainsAny(f.val, "\r\n\x00") {
			v.fail(p+"."+f.name, "must be the path of a PEM file, not its content (write the path itself, not a ${file:} reference)")
		}
	}
	switch {
	case t.Cert != "" && t.Key == "":
		v.fail(p+".key", "required with cert")
	case t.Cert == "" && t.Key != "":
		v.fail(p+".cert", "required with key")
	}
}

// adapter records the problems an adapter's Validate found (err) in its
// section at prefix, each under its path there; the values they quote are
// shown as showValue says (not at all when they came through a
// reference), a URL entry the adapter quotes masked (internal/redact) as
// well. own are the config file's rules for the section beyond the
// adapter's: each goes before the first problem of a later field of sec
// (the section's Config), so that problems come in the order of its
// fields, and replaces the adapter's problems with its field (the file's
// rule is the stricter one, its message the file's).
func (v *checker) adapter(prefix string, sec any, err error, own ...brokers.FieldError) {
	var fes brokers.FieldErrors
	if err != nil && !errors.As(err, &fes) {
		fes = brokers.FieldErrors{{Msg: err.Error()}}
	}
	if len(own) > 0 {
		ownPath := map[string]bool{}
		for _, o := range own {
			ownPath[o.Path] = true
		}
		var kept brokers.FieldErrors
		for _, fe := range fes {
			if !ownPath[fe.Path] {
				kept = append(kept, fe)
			}
		}
		fes = kept
	}
	for _, o := range own {
		i := 0
		for i < len(fes) && fieldIndex(sec, fes[i].Path) <= fieldIndex(sec, o.Path) {
			i++
		}
		fes = append(fes[:i], append(brokers.FieldErrors{o}, fes[i:]...)...)
	}
	for _, fe := range fes {
		path := prefix
		if fe.Path != "" {
			path += "." + fe.Path
		}
		msg := goQuoted.ReplaceAllStringFunc(fe.Msg, func(q string) string {
			u, err := strconv.Unquote(q)
			if err != nil {
				return q
			}
			if o, ok := maskedRef(v.origins, path, u); ok {
				return o.from
			}
			return showValue(v.origins, path, u)
		})
		v.errs = append(v.errs, FieldError{Path: path, Msg: msg})
	}
}

// maskedRef finds the reference a URL list entry came from when an adapter
// quotes it masked (nats.url): s is one comma-separated entry of the
// field's value, as internal/redact masks it, and differs from the entry
// as written (unmasked ones showValue finds).
func maskedRef(origins map[string]origin, path, s string) (origin, bool) {
	o, ok := origins[path]
	if !ok || s == "" {
		return origin{}, false
	}
	for _, part := range strings.Split(o.value, ",") {
		part = strings.TrimSpace(part)
		if m := redact.URL(part); m == s && m != part {
			return o, true
		}
	}
	return origin{}, false
}

// fieldIndex is the index in the struct sec points to of the field a
// problem's path starts with (by its yaml name); past the last field for
// the section as a whole.
func fieldIndex(sec any, path string) int {
	name, _, _ := strings.Cut(path, ".")
	name, _, _ = strings.Cut(name, "[")
	t := reflect.TypeOf(sec).Elem()
	for i := 0; i < t.NumField(); i++ {
		if yamlName(t.Field(i)) == name {
			return i
		}
	}
	return t.NumField()
}

// batchBytes checks that a source's messages and dead letters fit its
// batches: a message or dead letter larger than batch_bytes would be a
// batch on its own, larger than the bound the store was sized for.
func (v *checker) batchBytes(p string, s *Source) {
	v.between(p+".batch_bytes", s.BatchBytes, 1<<10, 1<<30)
	v.between(p+".dead_letter_max_bytes", s.DeadLetterMaxBytes, 1, 1<<30)
	if s.BatchBytes < 1<<10 || s.BatchBytes > 1<<30 {
		return
	}
	if s.MaxMessageBytes > s.BatchBytes && s.MaxMessageBytes <= 1<<30 {
		v.fail(p+".max_message_bytes", "must not exceed batch_bytes (%d), not %d: a message that size could never fit a batch", s.BatchBytes, s.MaxMessageBytes)
	}
	if s.DeadLetterMaxBytes > s.BatchBytes && s.DeadLetterMaxBytes <= 1<<30 {
		v.fail(p+".dead_letter_max_bytes", "must not exceed batch_bytes (%d), not %d: a dead letter that size could never fit a batch", s.BatchBytes, s.DeadLetterMaxBytes)
	}
}

// storeLimits refuses batches the store named by url could never commit.
// PostgreSQL takes each kind of write of a batch as one statement's array
// parameters and refuses a message or a value over 1 GB (as a protocol
// violation that looks transient: the unit would retry for ever); SQLite
// refuses a value over SQLITE_MAX_LENGTH, so a dead letter's payload must
// stay below it.
func (v *checker) storeLimits(p string, s *Source, url string) {
	switch {
	case strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://"):
		if s.BatchBytes > postgres.MaxBatchBytes && s.BatchBytes <= 1<<30 {
			v.fail(p+".batch_bytes", "must be at most %d with a PostgreSQL store, not %d: a batch travels in one statement, and the server refuses one over 1 GB",
				postgres.MaxBatchBytes, s.BatchBytes)
		}
	case strings.HasPrefix(url, "sqlite:"):
		if s.DeadLetterMaxBytes > sqlite.MaxValueBytes && s.DeadLetterMaxBytes <= 1<<30 {
			v.fail(p+".dead_letter_max_bytes", "must be at most %d with a SQLite store, not %d: SQLite refuses a longer value",
				sqlite.MaxValueBytes, s.DeadLetterMaxBytes)
		}
	}
}

// decoding checks the decode section: a known format; a registry, valid,
// for a wire format and none for json; records mode for a wire format.
func (v *checker) decoding(p string, s *Source) {
	d := s.Decoding
	v.oneOf(p+".format", d.Format, "json", "avro", "protobuf", "json_schema")
	switch d.Format {
	case "avro", "protobuf", "json_schema":
	default:
		if d.Registry != nil {
			v.fail(p+".registry", "only valid with format avro, protobuf or json_schema")
		}
		return
	}
	if s.Mode == "handler" {
		v.fail(p+".format", "%s decodes records: only valid with mode: records", d.Format)
	}
	if d.Registry == nil {
		v.fail(p+".registry", "required with format %s: the schema registry's url", d.Format)
		return
	}
	if err := d.RegistryConfig().Validate(); err != nil {
		v.fail(p+".registry.url", "%s", strings.TrimPrefix(err.Error(), "registry url: "))
	}
	if d.Registry.Password != "" && d.Registry.Username == "" {
		v.fail(p+".registry.username", "required with a password")
	}
}
