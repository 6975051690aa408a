package decode

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// Avro to JSON. hamba/avro parses the registry's schema and reads the
// binary encoding (avro.Reader); the walk below writes the JSON document
// straight from the schema, without the library's generic map[string]any
// values (which wrap unions in maps named by the branch and would need a
// second walk to map the logical types). The mapping (README, "Schema
// registry formats"):
//
//	null, boolean, int, long, float, double  the JSON literal (NaN and ±Inf are refused)
//	string, enum                             a JSON string
//	bytes, fixed                             standard base64 in a string
//	decimal (bytes or fixed)                 a JSON number with exactly scale digits after the point
//	uuid                                     the string as it is
//	date                                     "2006-01-02"
//	time-millis, time-micros                 "15:04:05.000", "15:04:05.000000"
//	timestamp-millis, timestamp-micros       RFC 3339 in UTC: "2006-01-02T15:04:05.000Z", "….000000Z"
//	local-timestamp-millis, -micros          the same without the "Z"
//	duration (fixed 12)                      {"months": m, "days": d, "milliseconds": ms}
//	array                                    a JSON array
//	map                                      a JSON object
//	record                                   a JSON object, the fields in schema order
//	union                                    the value of its branch, without the branch's name
//
// A Debezium change event in Avro is a record with op, before and after
// (each a union of null and the row record): it becomes the JSON
// {"before": …, "after": …, "op": …, …} that the JSON path reads.

// avroLimits bound what one message may make the walk do: the nesting of
// a recursive schema, and the items of arrays and maps (an item of a
// schema that takes no bytes, null or an empty record, could otherwise be
// counted in the billions by a few bytes of block header).
const avroMaxDepth = 1000

type avroWriter struct {
	r     *avro.Reader
	out   []byte
	items int // array and map items left
}

// avroJSON decodes one Avro binary value of schema s into JSON.
func avroJSON(s avro.Schema, data []byte, out []byte) ([]byte, error) {
	w := avroWriter{r: avro.NewReader(nil, 0).Reset(data), out: out, items: len(data) + 64}
	if err := w.value(s, 0); err != nil {
		return nil, err
	}
	if w.r.Error != nil {
		return nil, w.r.Error
	}
	// a body longer than its value is no value of the schema (a wrong
	// schema id, or two messages run together): Peek finds a byte left
	if w.r.Peek(); w.r.Error == nil {
		return nil, errors.New("bytes left after the value")
	}
	return w.out, nil
}

var errAvroItems = errors.New("more array or map items than the message has bytes")

func (w *avroWriter) value(s avro.Schema, depth int) error {
	if depth > avroMaxDepth {
		return fmt.Errorf("nested more than %d deep", avroMaxDepth)
	}
	if w.r.Error != nil {
		return w.r.Error
	}
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	var logical avro.LogicalSchema
	if l, ok := s.(avro.LogicalTypeSchema); ok {
		logical = l.Logical()
	}
	switch s.Type() {
	case avro.Null:
		w.out = append(w.out, "null"...)
	case avro.Boolean:
		w.out = strconv.AppendBool(w.out, w.r.ReadBool())
	case avro.Int:
		n := w.r.ReadInt()
		switch logicalType(logical) {
		case avro.Date:
			w.str(time.Unix(int64(n)*86400, 0).UTC().Format(time.DateOnly))
		case avro.TimeMillis:
			w.str(clockTime(time.Duration(n)*time.Millisecond, "15:04:05.000"))
		default:
			w.out = strconv.AppendInt(w.out, int64(n), 10)
		}
	case avro.Long:
		n := w.r.ReadLong()
		switch logicalType(logical) {
		case avro.TimeMicros:
			w.str(clockTime(time.Duration(n)*time.Microsecond, "15:04:05.000000"))
		case avro.TimestampMillis:
			w.str(time.UnixMilli(n).UTC().Format("2006-01-02T15:04:05.000Z"))
		case avro.TimestampMicros:
			w.str(time.UnixMicro(n).UTC().Format("2006-01-02T15:04:05.000000Z"))
		case avro.LocalTimestampMillis:
			w.str(time.UnixMilli(n).UTC().Format("2006-01-02T15:04:05.000"))
		case avro.LocalTimestampMicros:
			w.str(time.UnixMicro(n).UTC().Format("2006-01-02T15:04:05.000000"))
		default:
			w.out = strconv.AppendInt(w.out, n, 10)
		}
	case avro.Float:
		return w.float(float64(w.r.ReadFloat()), 32)
	case avro.Double:
		return w.float(w.r.ReadDouble(), 64)
	case avro.String:
		v := w.r.ReadString()
		if w.r.Error == nil && !utf8.ValidString(v) {
			return errors.New("a string is not valid UTF-8")
		}
		w.str(v)
	case avro.Bytes:
		b := w.r.ReadBytes()
		if d, ok := logical.(*avro.DecimalLogicalSchema); ok {
			w.decimal(b, d.Scale())
			break
		}
		w.base64(b)
	case avro.Fixed:
		f := s.(*avro.FixedSchema)
		b := make([]byte, f.Size())
		w.r.Read(b)
		switch l := logical.(type) {
		case *avro.DecimalLogicalSchema:
			w.decimal(b, l.Scale())
		default:
			if logicalType(logical) == avro.Duration && len(b) == 12 {
				le := func(p []byte) int64 {
					return int64(uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24)
				}
				w.out = fmt.Appendf(w.out, `{"months":%d,"days":%d,"milliseconds":%d}`, le(b[0:4]), le(b[4:8]), le(b[8:12]))
				break
			}
			w.base64(b)
		}
	case avro.Enum:
		e := s.(*avro.EnumSchema)
		i := int(w.r.ReadInt())
		if w.r.Error != nil {
			return w.r.Error
		}
		if i < 0 || i >= len(e.Symbols()) {
			return fmt.Errorf("enum %s: symbol %d of %d", e.FullName(), i, len(e.Symbols()))
		}
		w.str(e.Symbols()[i])
	case avro.Union:
		u := s.(*avro.UnionSchema)
		i := int(w.r.ReadLong())
		if w.r.Error != nil {
			return w.r.Error
		}
		if i < 0 || i >= len(u.Types()) {
			return fmt.Errorf("union branch %d of %d", i, len(u.Types()))
		}
		return w.value(u.Types()[i], depth+1)
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		w.out = append(w.out, '[')
		first := true
		if err := w.blocks(func() error {
			if !first {
				w.out = append(w.out, ',')
			}
			first = false
			return w.value(items, depth+1)
		}); err != nil {
			return err
		}
		w.out = append(w.out, ']')
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		w.out = append(w.out, '{')
		first := true
		if err := w.blocks(func() error {
			if !first {
				w.out = append(w.out, ',')
			}
			first = false
			k := w.r.ReadString()
			if w.r.Error == nil && !utf8.ValidString(k) {
				return errors.New("a map key is not valid UTF-8")
			}
			w.str(k)
			w.out = append(w.out, ':')
			return w.value(values, depth+1)
		}); err != nil {
			return err
		}
		w.out = append(w.out, '}')
	case avro.Record, avro.Error:
		w.out = append(w.out, '{')
		for i, f := range s.(*avro.RecordSchema).Fields() {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			w.str(f.Name())
			w.out = append(w.out, ':')
			if err := w.value(f.Type(), depth+1); err != nil {
				return err
			}
		}
		w.out = append(w.out, '}')
	default:
		return fmt.Errorf("schema type %s is not supported", s.Type())
	}
	return w.r.Error
}

// blocks reads the blocks of an array or a map, calling item for each item.
func (w *avroWriter) blocks(item func() error) error {
	for {
		n, _ := w.r.ReadBlockHeader()
		if w.r.Error != nil {
			return w.r.Error
		}
		if n == 0 {
			return nil
		}
		if n < 0 || n > int64(w.items) {
			return errAvroItems
		}
		w.items -= int(n)
		for ; n > 0; n-- {
			if err := item(); err != nil {
				return err
			}
		}
	}
}

func logicalType(l avro.LogicalSchema) avro.LogicalType {
	if l == nil {
		return ""
	}
	return l.Type()
}

// clockTime is a time of day as layout shows it.
func clockTime(d time.Duration, layout string) string {
	return time.Unix(0, 0).UTC().Add(d).Format(layout)
}

func (w *avroWriter) float(f float64, bits int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v has no JSON form", f)
	}
	w.out = strconv.AppendFloat(w.out, f, 'g', -1, bits)
	return nil
}

// decimal writes the two's-complement big-endian unscaled value b with
// scale digits after the point.
func (w *avroWriter) decimal(b []byte, scale int) {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	if n.Sign() < 0 {
		w.out = append(w.out, '-')
	}
	digits := n.Abs(n).String()
	if scale <= 0 {
		w.out = append(w.out, digits...)
		return
	}
	for len(digits) <= scale {
		digits = "0" + digits
	}
	w.out = append(w.out, digits[:len(digits)-scale]...)
	w.out = append(w.out, '.')
	w.out = append(w.out, digits[len(digits)-scale:]...)
}

func (w *avroWriter) base64(b []byte) {
	w.out = append(w.out, '"')
	w.out = base64.StdEncoding.AppendEncode(w.out, b)
	w.out = append(w.out, '"')
}

// str writes s as a JSON string.
func (w *avroWriter) str(s string) { w.out = appendJSONString(w.out, s) }

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
