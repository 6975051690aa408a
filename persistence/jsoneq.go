package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// JSONEqual reports whether two JSON texts are the same value the way
// PostgreSQL's jsonb compares them: object key order and whitespace do not
// matter, a repeated object key keeps its last value, and numbers compare by
// value (1, 1.0 and 1e0 are equal). Both texts must be valid JSON.
func JSONEqual(a, b []byte) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	va, err := decodeJSON(a)
	if err != nil {
		return false, err
	}
	vb, err := decodeJSON(b)
	if err != nil {
		return false, err
	}
	return sameJSON(va, vb), nil
}

var errInvalidJSON = errors.New("invalid JSON document")

// decodeJSON decodes one JSON value, keeping numbers as text.
func decodeJSON(doc []byte) (any, error) {
	if err := CheckJSON(doc); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errInvalidJSON
	}
	return v, nil
}

func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, vx := range x {
			vy, ok := y[k]
			if !ok || !sameJSON(vx, vy) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		return sameNumber(string(x), string(y))
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// sameNumber compares two JSON numbers by value without converting them to
// floats (which would round) or to big.Rat (whose size grows with the
// exponent): each becomes a sign, its significant digits and a decimal
// exponent.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	na, oka := normalNumber(a)
	nb, okb := normalNumber(b)
	if !oka || !okb {
		return false
	}
	return na == nb
}

type decimal struct {
	neg    bool
	digits string // no leading or trailing zeros; empty for zero
	exp    int64  // value = digits × 10^exp
}

func normalNumber(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e > 1<<53 || e < -(1<<53) {
			return d, false
		}
		d.exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	d.exp -= int64(len(frac))
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	d.exp += int64(len(digits) - len(trimmed))
	d.digits = trimmed
	if d.digits == "" {
		return decimal{}, true // zero, whatever its sign and exponent
	}
	return d, true
}

// CheckJSON reports whether doc is one valid JSON value, as a store must
// before writing it. It validates without decoding.
func CheckJSON(doc []byte) error {
	if !json.Valid(doc) {
		return errInvalidJSON
	}
	return nil
}
