package decode

// Reading the parsed tree: string values unescaped, object members looked up,
// and the canonical form of a value (Canonical).

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// str returns the decoded text of string node i. Strings without escapes
// are returned without copying.
func (p *parser) str(i int) []byte {
	nd := &p.nodes[i]
	raw := p.src[nd.start+1 : nd.end-1]
	if !nd.esc {
		return raw
	}
	return unescape(make([]byte, 0, len(raw)), raw)
}

// unescape appends the decoded form of raw, the validated inside of a JSON
// string, to dst.
func unescape(dst, raw []byte) []byte {
	for i := 0; ; {
		if dst, i = appendPlain(dst, raw, i); i == len(raw) {
			return dst
		}
		r, n := escapedRune(raw, i)
		dst = utf8.AppendRune(dst, r)
		i += n
	}
}

// appendPlain appends raw[i:] up to its next backslash to dst and returns
// the backslash's index, len(raw) where there is none.
func appendPlain(dst, raw []byte, i int) ([]byte, int) {
	j := bytes.IndexByte(raw[i:], '\\')
	if j < 0 {
		return append(dst, raw[i:]...), len(raw)
	}
	return append(dst, raw[i:i+j]...), i + j
}

// escapedRune decodes the validated escape at raw[i] and says how many
// bytes it spans.
func escapedRune(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, _ := hex4(raw, i+2)
		if r >= 0xd800 && r <= 0xdbff {
			lo, _ := hex4(raw, i+8)
			return (r-0xd800)<<10 | (lo - 0xdc00) + 0x10000, 12
		}
		return r, 6
	}
	return rune(raw[i+1]), 2 // " \ /
}

// member returns the value node of the last member of object obj named
// name (the last wins, as in the canonical document), or -1.
func (p *parser) member(obj int, name string) int {
	nd := &p.nodes[obj]
	found := -1
	kids := p.kids[nd.first : nd.first+nd.n]
	for j := 0; j+1 < len(kids); j += 2 {
		kn := &p.nodes[kids[j]]
		if !kn.esc {
			if string(p.src[kn.start+1:kn.end-1]) == name {
				found = int(kids[j+1])
			}
			continue
		}
		if string(p.str(int(kids[j]))) == name {
			found = int(kids[j+1])
		}
	}
	return found
}

// canonical appends the canonical form of node i to dst: no insignificant
// whitespace, object members sorted by the bytes of their decoded UTF-8
// names (a duplicated name keeps its last value), numbers exactly as
// written, strings with the shortest escapes (only '"', '\\' and control
// characters are escaped; \b \f \n \r \t where they exist, else \u00XX in
// lower case).
func (p *parser) canonical(dst []byte, i int) []byte {
	nd := &p.nodes[i]
	switch nd.kind {
	case kindNull, kindFalse, kindTrue, kindNumber:
		return append(dst, p.src[nd.start:nd.end]...)
	case kindString:
		if !nd.esc {
			return append(dst, p.src[nd.start:nd.end]...)
		}
		return appendString(dst, p.src[nd.start+1:nd.end-1])
	case kindArray:
		dst = append(dst, '[')
		for j, k := range p.kids[nd.first : nd.first+nd.n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = p.canonical(dst, int(k))
		}
		return append(dst, ']')
	}
	// Object: its members go on the scratch stack p.members[base:top] while
	// it is written; nested objects use the space above top.
	kids := p.kids[nd.first : nd.first+nd.n]
	if p.members == nil {
		p.members = make([]member, 0, 32)
	}
	base := len(p.members)
	for j := 0; j+1 < len(kids); j += 2 {
		p.members = append(p.members, member{name: p.str(int(kids[j])), key: kids[j], val: kids[j+1]})
	}
	top := len(p.members)
	ms := p.members[base:top]
	cmp := func(a, b member) int { return bytes.Compare(a.name, b.name) }
	if !slices.IsSortedFunc(ms, cmp) {
		slices.SortStableFunc(ms, cmp)
	}
	dst = append(dst, '{')
	wrote := false
	for j := base; j < top; j++ {
		// Re-read through p.members: a nested object may have grown it.
		m := p.members[j]
		if j+1 < top && bytes.Equal(m.name, p.members[j+1].name) {
			continue // a later duplicate wins
		}
		if wrote {
			dst = append(dst, ',')
		}
		wrote = true
		dst = p.canonical(dst, int(m.key))
		dst = append(dst, ':')
		dst = p.canonical(dst, int(m.val))
		p.members = p.members[:top]
	}
	p.members = p.members[:base]
	return append(dst, '}')
}

// shortEscape is the letter of the two-byte escape a canonical string
// writes a character with, 0 for none.
var shortEscape = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendString appends raw, the validated inside of a JSON string that
// contains escapes, as a canonical JSON string.
func appendString(dst, raw []byte) []byte {
	dst = append(dst, '"')
	for i := 0; ; {
		if dst, i = appendPlain(dst, raw, i); i == len(raw) {
			return append(dst, '"')
		}
		r, n := escapedRune(raw, i)
		i += n
		switch {
		case r < utf8.RuneSelf && shortEscape[r] != 0:
			dst = append(dst, '\\', shortEscape[r])
		case r < 0x20:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
}

// Canonical returns the canonical form of a JSON document (see Record): no
// insignificant whitespace, object members sorted by name recursively (a
// duplicated name keeps its last value), numbers exactly as written,
// strings minimally escaped. The result is a new slice. It returns an error
// for a body that is not JSON or that drover does not store (a \u0000
// character, a lone surrogate, nesting deeper than 1000); its message is
// the dead-letter reason Record would give.
func Canonical(data []byte) ([]byte, error) {
	var p parser
	if err := p.parse(data); err != nil {
		return nil, err
	}
	return p.canonical(make([]byte, 0, len(data)), 0), nil
}
