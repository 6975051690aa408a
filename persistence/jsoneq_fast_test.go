package persistence

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// jsonGen writes random JSON values, each in one of several spellings of
// the same value (key order, number forms, string escapes, whitespace),
// sometimes with a repeated key, so that JSONEqual's fast path can be
// checked against the full decode on texts that are equal without being
// the same bytes.
type jsonGen struct{ r *rand.Rand }

type jv struct {
	kind   byte // o object, a array, s string, n number, t true, f false, z null
	keys   []string
	vals   []*jv
	str    string
	digits int64
}

func (g jsonGen) value(depth int) *jv {
	k := "sntfzoa"[g.r.IntN(7)]
	if depth > 3 && (k == 'o' || k == 'a') {
		k = 's'
	}
	v := &jv{kind: k}
	switch k {
	case 's':
		v.str = []string{"a", "b", "A", "é", "x\"y", ""}[g.r.IntN(6)]
	case 'n':
		v.digits = int64(g.r.IntN(5)) - 1
	case 'o', 'a':
		n := g.r.IntN(4)
		for i := range n {
			v.keys = append(v.keys, []string{"k", "id", "A", "name", "n"}[(i+g.r.IntN(2))%5])
			v.vals = append(v.vals, g.value(depth+1))
		}
	}
	return v
}

// mutate changes one scalar somewhere in v (a copy), or returns v itself.
func (g jsonGen) mutate(v *jv) *jv {
	c := *v
	switch c.kind {
	case 'o', 'a':
		if len(c.vals) == 0 {
			return &jv{kind: 't'}
		}
		c.vals = append([]*jv(nil), c.vals...)
		i := g.r.IntN(len(c.vals))
		c.vals[i] = g.mutate(c.vals[i])
	case 's':
		c.str += "!"
	case 'n':
		c.digits++
	default:
		c.kind = "tfz"[g.r.IntN(3)]
	}
	return &c
}

func (g jsonGen) write(b *strings.Builder, v *jv) {
	ws := func() {
		if g.r.IntN(4) == 0 {
			b.WriteString(" \n")
		}
	}
	switch v.kind {
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case 'z':
		b.WriteString("null")
	case 'n':
		switch g.r.IntN(4) {
		case 0:
			fmt.Fprintf(b, "%d", v.digits)
		case 1:
			fmt.Fprintf(b, "%d.0", v.digits)
		case 2:
			if v.digits == 0 {
				b.WriteString("0.00")
			} else {
				fmt.Fprintf(b, "%d0e-1", v.digits)
			}
		default:
			fmt.Fprintf(b, "%de0", v.digits)
		}
	case 's':
		g.str(b, v.str)
	case 'a':
		b.WriteByte('[')
		for i, e := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			g.write(b, e)
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		order := g.r.Perm(len(v.keys))
		for i, j := range order {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			g.str(b, v.keys[j])
			b.WriteByte(':')
			g.write(b, v.vals[j])
		}
		b.WriteByte('}')
	}
}

func (g jsonGen) str(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case g.r.IntN(3) == 0:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

// JSONEqual (fastjson, member by member) answers as the full decode does
// on every pair: the same value spelt twice, and a value against a copy
// with one scalar changed, repeated keys included.
func TestJSONEqualFastPathAgreesWithDecode(t *testing.T) {
	g := jsonGen{r: rand.New(rand.NewPCG(1, 2))}
	var equal, differ, repeated int
	for i := range 20000 {
		v := g.value(0)
		w := v
		if i%2 == 1 {
			w = g.mutate(v)
		}
		var a, b strings.Builder
		g.write(&a, v)
		g.write(&b, w)
		got, err := JSONEqual([]byte(a.String()), []byte(b.String()))
		want, werr := slowJSONEqual([]byte(a.String()), []byte(b.String()))
		if err != nil || werr != nil {
			t.Fatalf("%s vs %s: errors %v, %v", a.String(), b.String(), err, werr)
		}
		if got != want {
			t.Fatalf("JSONEqual(%s, %s) = %v, the full decode says %v", a.String(), b.String(), got, want)
		}
		if v, err := JSONEqualValid([]byte(a.String()), []byte(b.String())); err != nil || v != want {
			t.Fatalf("JSONEqualValid(%s, %s) = %v, %v; the full decode says %v", a.String(), b.String(), v, err, want)
		}
		if got {
			equal++
		} else {
			differ++
		}
		if strings.Count(a.String(), `"k"`) > 1 || strings.Count(a.String(), `"id"`) > 1 {
			repeated++
		}
	}
	if equal < 5000 || differ < 5000 || repeated == 0 {
		t.Fatalf("the generator is too narrow: %d equal pairs, %d different, %d with a repeated key spelt plainly", equal, differ, repeated)
	}
}

// BenchmarkJSONEqual compares two 200-byte documents that differ in one
// value, the common case of an upsert over a stored document.
func BenchmarkJSONEqual(b *testing.B) {
	x := []byte(`{"id":"order-123456","customer":"c-998877","status":"paid","amount":1234.50,"currency":"EUR","items":[{"sku":"a-1","qty":2},{"sku":"b-2","qty":1}],"note":"leave at the door"}`)
	y := []byte(`{"id":"order-123456","customer":"c-998877","status":"sent","amount":1234.50,"currency":"EUR","items":[{"sku":"a-1","qty":2},{"sku":"b-2","qty":1}],"note":"leave at the door"}`)
	for name, eq := range map[string]func(a, b []byte) (bool, error){"fast": JSONEqual, "valid": JSONEqualValid, "decode": slowJSONEqual} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if same, err := eq(x, y); same || err != nil {
					b.Fatal(same, err)
				}
			}
		})
	}
}
