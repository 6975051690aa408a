package decode

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects. Deeper bodies are
// dead-lettered ("unsupported JSON") rather than parsed, so that a hostile
// message cannot exhaust the stack.
const maxDepth = 1000

// kind is the JSON type of a parsed value.
type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// typeName is the name used in reasons and by the quality package.
func (k kind) typeName() string {
	switch k {
	case kindNull:
		return "null"
	case kindFalse, kindTrue:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	}
	return "object"
}

// node is one parsed value. Scalars point into the source; containers point
// into parser.kids (objects hold key, value, key, value, ...).
type node struct {
	kind  kind
	esc   bool  // string: contains a backslash escape
	start int32 // first byte (a string's opening quote)
	end   int32 // one past the last byte (a string's closing quote)
	first int32 // container: index of its first kid in parser.kids
	n     int32 // container: number of kids
}

// maxInput is the longest document the parser takes (node offsets are
// int32).
const maxInput = 1<<31 - 1

// syntaxError is a body that is not JSON (invalid) or that is JSON drover
// will not store (unsupported: NUL characters, lone surrogates and extreme
// nesting, which PostgreSQL's jsonb rejects or which would exhaust a stack).
type syntaxError struct {
	unsupported bool
	msg         string
	off         int
}

func (e *syntaxError) Error() string {
	prefix := PrefixInvalidJSON
	if e.unsupported {
		prefix = PrefixUnsupportedJSON
	}
	return fmt.Sprintf("%s%s at offset %d", prefix, e.msg, e.off)
}

// parser is a strict RFC 8259 parser producing a flat tree. It never
// panics and allocates only its node and kid arenas.
type parser struct {
	src     []byte
	pos     int
	nodes   []node
	kids    []int32
	stack   []int32 // kids of containers being parsed
	depth   int
	members []member // scratch of canonical: members of the objects being written
}

// parsers holds parsers between messages: a parser's arenas are reused
// (Record parses every message of a fetch; allocating them per message
// was most of the decoder's garbage).
var parsers = sync.Pool{New: func() any { return new(parser) }}

// maxPooledNodes is the largest node arena a parser goes back to the pool
// with: a parser that took a huge document is left to the collector, so
// the pool does not pin its arenas.
const maxPooledNodes = 1 << 14

// getParser takes a parser from the pool; putParser gives it back.
func getParser() *parser { return parsers.Get().(*parser) }

func putParser(p *parser) {
	if cap(p.nodes) > maxPooledNodes || cap(p.members) > maxPooledNodes {
		return
	}
	p.src = nil // do not pin the message
	clear(p.members[:cap(p.members)])
	parsers.Put(p)
}

// member is one object member while canonical sorts them.
type member struct {
	name []byte
	key  int32 // key node
	val  int32 // value node
}

// parse parses src as exactly one JSON value surrounded by optional
// whitespace and returns the index of its root node (always 0).
func (p *parser) parse(src []byte) error {
	p.src, p.pos, p.depth = src, 0, 0
	if len(src) > maxInput {
		return &syntaxError{unsupported: true, msg: "document over 2 GiB", off: 0}
	}
	// A parser from the pool keeps its arenas: only a larger document
	// than it has seen allocates.
	n := len(src)/5 + 8
	if cap(p.nodes) < n {
		p.nodes = make([]node, 0, n)
		p.kids = make([]int32, 0, n)
	}
	if p.stack == nil {
		p.stack = make([]int32, 0, 32)
	}
	p.nodes, p.kids, p.stack, p.members = p.nodes[:0], p.kids[:0], p.stack[:0], p.members[:0]
	if _, err := p.value(); err != nil {
		return err
	}
	p.skipWS()
	if p.pos < len(p.src) {
		return p.unexpected("after the top-level value")
	}
	return nil
}

func (p *parser) skipWS() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) fail(msg string) error {
	return &syntaxError{msg: msg, off: p.pos}
}

// unexpected reports the byte at p.pos, or the end of input.
func (p *parser) unexpected(where string) error {
	if p.pos >= len(p.src) {
		return p.fail("unexpected end of input")
	}
	what := "unexpected " + describe(p.src[p.pos])
	if where != "" {
		what += " " + where
	}
	return p.fail(what)
}

// describe names one byte for a reason: character 'x' or byte 0xNN.
func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "character " + strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) value() (int, error) {
	p.skipWS()
	if p.pos >= len(p.src) {
		return 0, p.fail("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.string()
	case c == 't':
		return p.literal("true", kindTrue)
	case c == 'f':
		return p.literal("false", kindFalse)
	case c == 'n':
		return p.literal("null", kindNull)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return 0, p.unexpected("")
}

func (p *parser) add(nd node) int {
	p.nodes = append(p.nodes, nd)
	return len(p.nodes) - 1
}

func (p *parser) scalar(k kind, start int) int {
	return p.add(node{kind: k, start: int32(start), end: int32(p.pos)})
}

func (p *parser) literal(word string, k kind) (int, error) {
	start := p.pos
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.src) || p.src[p.pos] != word[i] {
			return 0, p.unexpected("")
		}
		p.pos++
	}
	return p.scalar(k, start), nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

func (p *parser) number() (int, error) {
	start := p.pos
	if p.src[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '0' {
		p.pos++
	} else if p.digits() == 0 {
		return 0, p.unexpected("in a number")
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return 0, p.unexpected("in a number")
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return 0, p.unexpected("in a number")
		}
	}
	if !storableNumber(p.src[start:p.pos]) {
		return 0, &syntaxError{unsupported: true, msg: "number beyond PostgreSQL's numeric range (131072 integer or 16383 fraction digits)", off: start}
	}
	return p.scalar(kindNumber, start), nil
}

// PostgreSQL's jsonb keeps numbers as numeric, which refuses values with
// more than numericIntDigits digits before the decimal point or
// numericScale digits after it ("value overflows numeric format"). Such a
// number would fail its whole batch, so it is dead-lettered instead.
const (
	numericIntDigits = 131072
	numericScale     = 16383
)

// storableNumber reports whether a valid JSON number literal fits numeric.
func storableNumber(lit []byte) bool {
	i := 0
	if lit[0] == '-' {
		i++
	}
	intStart := i
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	intDigits := int64(i - intStart)
	if intDigits == 1 && lit[intStart] == '0' {
		intDigits = 0
	}
	var frac int64
	if i < len(lit) && lit[i] == '.' {
		i++
		s := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
		frac = int64(i - s)
	}
	var exp int64
	if i < len(lit) {
		i++ // e or E
		neg := false
		if lit[i] == '+' || lit[i] == '-' {
			neg = lit[i] == '-'
			i++
		}
		for ; i < len(lit); i++ {
			if exp < 1<<40 {
				exp = exp*10 + int64(lit[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	return intDigits+exp <= numericIntDigits && frac-exp <= numericScale
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// hex4 reads the 4 hex digits after "\u" at src[i:].
func hex4(src []byte, i int) (rune, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var r rune
	for j := i; j < i+4; j++ {
		v := hexVal(src[j])
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func (p *parser) string() (int, error) {
	start := p.pos
	p.pos++ // opening quote
	esc := false
	for {
		if p.pos >= len(p.src) {
			return 0, p.fail("unexpected end of input in a string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			i := p.scalar(kindString, start)
			p.nodes[i].esc = esc
			return i, nil
		case c == '\\':
			esc = true
			if err := p.escape(); err != nil {
				return 0, err
			}
		case c < 0x20:
			return 0, p.fail(fmt.Sprintf("control character 0x%02x in a string", c))
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return 0, p.fail("invalid UTF-8 in a string")
			}
			p.pos += size
		}
	}
}

// escape validates the escape sequence at p.pos and moves past it.
func (p *parser) escape() error {
	if p.pos+1 >= len(p.src) {
		p.pos = len(p.src)
		return p.fail("unexpected end of input in a string")
	}
	switch p.src[p.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		p.pos += 2
		return nil
	case 'u':
	default:
		p.pos++
		return p.fail("invalid escape of " + describe(p.src[p.pos]) + " in a string")
	}
	r, ok := hex4(p.src, p.pos+2)
	if !ok {
		return p.fail(`invalid \u escape in a string`)
	}
	switch {
	case r == 0:
		return &syntaxError{unsupported: true, msg: `\u0000 in a string`, off: p.pos}
	case r >= 0xdc00 && r <= 0xdfff:
		return &syntaxError{unsupported: true, msg: fmt.Sprintf(`lone surrogate \u%04x`, r), off: p.pos}
	case r >= 0xd800 && r <= 0xdbff:
		lo, ok := rune(0), false
		if p.pos+7 < len(p.src) && p.src[p.pos+6] == '\\' && p.src[p.pos+7] == 'u' {
			lo, ok = hex4(p.src, p.pos+8)
		}
		if !ok || lo < 0xdc00 || lo > 0xdfff {
			return &syntaxError{unsupported: true, msg: fmt.Sprintf(`lone surrogate \u%04x`, r), off: p.pos}
		}
		p.pos += 12
		return nil
	}
	p.pos += 6
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &syntaxError{unsupported: true, msg: fmt.Sprintf("nesting deeper than %d", maxDepth), off: p.pos}
	}
	return nil
}

// close turns the kids collected on the stack since base into container i.
func (p *parser) close(i, base int) {
	p.nodes[i].end = int32(p.pos)
	p.nodes[i].first = int32(len(p.kids))
	p.nodes[i].n = int32(len(p.stack) - base)
	p.kids = append(p.kids, p.stack[base:]...)
	p.stack = p.stack[:base]
	p.depth--
}

// open adds a container node of kind k whose opening bracket is at p.pos
// and moves to its first member: the node, the stack's base for its kids,
// and whether it is empty (closer follows, and the node is closed).
func (p *parser) open(k kind, closer byte) (i, base int, empty bool, err error) {
	if err := p.enter(); err != nil {
		return 0, 0, false, err
	}
	i = p.add(node{kind: k, start: int32(p.pos)})
	p.pos++
	base = len(p.stack)
	p.skipWS()
	if p.pos < len(p.src) && p.src[p.pos] == closer {
		p.pos++
		p.close(i, base)
		return i, base, true, nil
	}
	return i, base, false, nil
}

func (p *parser) array() (int, error) {
	i, base, empty, err := p.open(kindArray, ']')
	if err != nil || empty {
		return i, err
	}
	for {
		v, err := p.value()
		if err != nil {
			return 0, err
		}
		p.stack = append(p.stack, int32(v))
		if done, err := p.next(i, base, ']', "an array"); err != nil {
			return 0, err
		} else if done {
			return i, nil
		}
	}
}

// next moves past the ',' after a member of container i (what, as errors
// name it) or past its closer, and then closes it (done).
func (p *parser) next(i, base int, closer byte, what string) (done bool, err error) {
	p.skipWS()
	if p.pos >= len(p.src) {
		return false, p.fail("unexpected end of input in " + what)
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		return false, nil
	case closer:
		p.pos++
		p.close(i, base)
		return true, nil
	default:
		return false, p.unexpected("in " + what + " (want ',' or '" + string(closer) + "')")
	}
}

func (p *parser) object() (int, error) {
	i, base, empty, err := p.open(kindObject, '}')
	if err != nil || empty {
		return i, err
	}
	for {
		p.skipWS()
		if p.pos >= len(p.src) {
			return 0, p.fail("unexpected end of input in an object")
		}
		if p.src[p.pos] != '"' {
			return 0, p.unexpected("in an object (want a string key)")
		}
		k, err := p.string()
		if err != nil {
			return 0, err
		}
		p.skipWS()
		if p.pos >= len(p.src) {
			return 0, p.fail("unexpected end of input in an object")
		}
		if p.src[p.pos] != ':' {
			return 0, p.unexpected("after an object key (want ':')")
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return 0, err
		}
		p.stack = append(p.stack, int32(k), int32(v))
		if done, err := p.next(i, base, '}', "an object"); err != nil {
			return 0, err
		} else if done {
			return i, nil
		}
	}
}
