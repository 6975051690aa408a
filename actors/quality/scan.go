package quality

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// jtype is the JSON type of a value, as reported in FieldStats.Types.
type jtype uint8

const (
	jString jtype = iota
	jNumber
	jBoolean
	jObject
	jArray
	jNull
	nTypes
)

var jtypeNames = [nTypes]string{"string", "number", "boolean", "object", "array", "null"}

// Integers and floats are both "number": a field holding 10 in one row and
// 10.5 in the next is not two types, and telling them apart would report a
// price column as retyped whenever its values happen to be round.

// member is one top-level member of a document.
type member struct {
	name []byte // raw name, quotes included
	esc  bool   // name has escapes
	val  []byte // raw value
	typ  jtype
}

var errDoc = errors.New("not a JSON object")

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// scanString returns the index after the string starting at b[i] ('"').
func scanString(b []byte, i int) (end int, esc bool, err error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, esc, nil
		case '\\':
			esc = true
			i++
		}
	}
	return 0, false, errDoc
}

// skipValue returns the type of the value at b[i] and the index after it.
// Nested containers are skipped by bracket counting: the document is
// Record's canonical output, and Observe checks its shape, not every byte.
func skipValue(b []byte, i int) (jtype, int, error) {
	if i >= len(b) {
		return 0, 0, errDoc
	}
	switch c := b[i]; c {
	case '"':
		end, _, err := scanString(b, i)
		return jString, end, err
	case '{', '[':
		t := jObject
		if c == '[' {
			t = jArray
		}
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _, err := scanString(b, i)
				if err != nil {
					return 0, 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return t, i + 1, nil
				}
			}
		}
		return 0, 0, errDoc
	}
	j := i
	for j < len(b) && !isWS(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	switch lit := string(b[i:j]); {
	case lit == "true" || lit == "false":
		return jBoolean, j, nil
	case lit == "null":
		return jNull, j, nil
	case isNumber(b[i:j]):
		return jNumber, j, nil
	}
	return 0, 0, errDoc
}

// members appends the top-level members of the JSON object doc to dst.
func members(dst []member, doc []byte) ([]member, error) {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return dst, errDoc
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		i++
	} else {
		for {
			if i >= len(doc) || doc[i] != '"' {
				return dst, errDoc
			}
			end, esc, err := scanString(doc, i)
			if err != nil {
				return dst, err
			}
			m := member{name: doc[i:end], esc: esc}
			i = skipWS(doc, end)
			if i >= len(doc) || doc[i] != ':' {
				return dst, errDoc
			}
			i = skipWS(doc, i+1)
			start := i
			m.typ, i, err = skipValue(doc, i)
			if err != nil {
				return dst, err
			}
			m.val = doc[start:i]
			dst = append(dst, m)
			i = skipWS(doc, i)
			if i < len(doc) && doc[i] == ',' {
				i = skipWS(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				i++
				break
			}
			return dst, errDoc
		}
	}
	if skipWS(doc, i) != len(doc) {
		return dst, errDoc
	}
	return dst, nil
}

// decodeString returns the text of a raw JSON string (with quotes).
func decodeString(raw []byte) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isNumber checks the JSON number grammar.
func isNumber(b []byte) bool {
	_, _, _, ok := splitNumber(b)
	return ok
}

// splitNumber splits a JSON number into its integer digits, fraction
// digits and exponent digits (with sign).
func splitNumber(b []byte) (intPart, frac, exp []byte, ok bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() []byte {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return b[s:i]
	}
	intPart = digits()
	if len(intPart) == 0 || (len(intPart) > 1 && intPart[0] == '0') {
		return nil, nil, nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if frac = digits(); len(frac) == 0 {
			return nil, nil, nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		s := i
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if len(digits()) == 0 {
			return nil, nil, nil, false
		}
		exp = b[s:i]
	}
	return intPart, frac, exp, i == len(b)
}

// isIntegral reports whether the JSON number literal b has an integral
// value, exactly (no floating point): 2, 2.0, 25e-1 no, 1.5e1 yes.
func isIntegral(b []byte) bool {
	intPart, frac, exp, ok := splitNumber(b)
	if !ok {
		return false
	}
	digits := string(intPart) + string(frac)
	last := -1 // index of the last non-zero digit
	for i := len(digits) - 1; i >= 0; i-- {
		if digits[i] != '0' {
			last = i
			break
		}
	}
	if last < 0 {
		return true // zero
	}
	// The decimal point sits after digit len(intPart)+e; the value is
	// integral when every non-zero digit is before it.
	const big = 1 << 40
	e := int64(0)
	neg := false
	for j, c := range exp {
		switch {
		case j == 0 && (c == '+' || c == '-'):
			neg = c == '-'
		case e < big:
			e = e*10 + int64(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return int64(last) < int64(len(intPart))+e
}

// fits reports whether a non-null value of type t with raw text raw fits a
// declared type.
func fits(declared Type, t jtype, raw []byte) bool {
	switch declared {
	case TypeJSON:
		return true
	case TypeInt:
		return t == jNumber && isIntegral(raw)
	case TypeFloat:
		return t == jNumber
	case TypeText:
		return t == jString
	case TypeBool:
		return t == jBoolean
	case TypeObject:
		return t == jObject
	case TypeArray:
		return t == jArray
	case TypeTimestamp:
		if t != jString {
			return false
		}
		s, ok := decodeString(raw)
		if !ok {
			return false
		}
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	}
	return true
}
