package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Input limits. A config beyond one of them is refused with a problem that
// says which (`drover check` and `drover node` exit 2); none of them is
// near what a real config needs.
const (
	// MaxConfigBytes is the largest config file: Load reads no more.
	MaxConfigBytes = 1 << 20
	// MaxFileRefBytes is the most one ${file:PATH} reads.
	MaxFileRefBytes = 64 << 10
	// MaxRefBytes is the most all ${env:} and ${file:} references of a
	// config may substitute together (an anchor holding a reference is
	// expanded once per alias).
	MaxRefBytes = 1 << 20
	// MaxSources is the most sources one node runs.
	MaxSources = 1000
	// MaxDepth is the deepest nesting of mappings and lists (a source's
	// kafka.tls is 4 deep).
	MaxDepth = 32
	// MaxMappingKeys is the most keys one mapping holds (a source has
	// about 20 fields).
	MaxMappingKeys = 100
	// MaxListEntries is the most entries one block list (one entry per
	// "- " line) holds; the sources list may be that long.
	MaxListEntries = 2 * MaxSources
	// MaxTokens is the most YAML tokens (keys, values and punctuation) a
	// config holds; 1,000 sources of 15 fields are about 50,000.
	MaxTokens = 200000
	// MaxAliasNodes is the most values YAML aliases may stand for in all,
	// counted as if each alias were replaced by a copy of its anchor.
	MaxAliasNodes = 100000
	// MaxErrors is the most problems Parse reports; a last one says how
	// many more there were.
	MaxErrors = 100
)

// maxQuote is the longest value a problem quotes.
const maxQuote = 100

// errTooLarge: a file is larger than its limit.
var errTooLarge = errors.New("file too large")

// readLimited reads at most max bytes of the file at path, and fails with
// errTooLarge if it holds more: it never reads further, so /dev/zero is
// refused as soon as max+1 bytes came. regular refuses anything but a
// regular file (a FIFO would block, a device never end) before opening it.
func readLimited(path string, max int64, regular bool) ([]byte, error) {
	if regular {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", path)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

// readFileRef is Options.ReadFile's default: a regular file of at most
// MaxFileRefBytes.
func readFileRef(path string) ([]byte, error) { return readLimited(path, MaxFileRefBytes, true) }

// origin is where a field's value came from, when it used a reference.
type origin struct {
	value string // the value, references substituted
	from  string // "the value from ${file:/etc/drover/x}"
}

// shown is text a problem prints as it is, whatever the verb (%q too).
type shown string

func (s shown) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, string(s)) }

// showValue is how a problem about the field at path shows the value s,
// which is the field's value or a part of it: quoted when it is short
// and written in the file; "the value from ${file:PATH}" when it came
// through a reference (it may be a file's whole content, or a secret
// put in the wrong field); "a value of N bytes" when it is long.
func showValue(origins map[string]origin, path, s string) string {
	if a, ok := showArg(origins, path, s).(shown); ok {
		return string(a)
	}
	return strconv.Quote(s)
}

// showArg is showValue for one argument of a problem's format: a string,
// SecretURL or error that showValue would not quote is replaced by what
// it says instead; the rest stay as they are.
func showArg(origins map[string]origin, path string, a any) any {
	switch v := a.(type) {
	case string:
		if o, ok := fromRef(origins, path, v); ok {
			return shown(o.from)
		}
		if len(v) > maxQuote {
			return shown(fmt.Sprintf("a value of %d bytes", len(v)))
		}
	case SecretURL:
		if o, ok := fromRef(origins, path, v.Reveal()); ok {
			return shown(o.from)
		}
		if len(v) > maxQuote {
			return shown(fmt.Sprintf("a value of %d bytes", len(v)))
		}
	case error:
		return shown(scrubQuoted(origins, path, v.Error()))
	}
	return a
}

// fromRef finds the origin of s: the field's own, when s is (a part of)
// its value, or any field's whose value is s.
func fromRef(origins map[string]origin, path, s string) (origin, bool) {
	if s == "" {
		return origin{}, false
	}
	if o, ok := origins[path]; ok && strings.Contains(o.value, s) {
		return o, true
	}
	for _, o := range origins {
		if o.value == s {
			return o, true
		}
	}
	return origin{}, false
}

var goQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// scrubQuoted replaces, in a message from elsewhere (persistence.ValidTable,
// quality.ParseSchema) about the field at path, each quoted part of the
// field's value by showValue's form, and a long quoted value by its size.
func scrubQuoted(origins map[string]origin, path, msg string) string {
	o, hasOrigin := origins[path]
	msg = goQuoted.ReplaceAllStringFunc(msg, func(q string) string {
		u, err := strconv.Unquote(q)
		if err != nil {
			return q
		}
		if hasOrigin && u != "" && strings.Contains(o.value, u) {
			return o.from
		}
		if len(u) > maxQuote {
			return fmt.Sprintf("a value of %d bytes", len(u))
		}
		return q
	})
	if hasOrigin && o.value != "" {
		msg = strings.ReplaceAll(msg, o.value, o.from)
	}
	return msg
}
