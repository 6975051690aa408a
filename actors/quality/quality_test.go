package quality

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

func TestParseSchema(t *testing.T) {
	tests := []struct {
		in   string
		want Schema
		err  string
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "id:int, name:text, price:float, ok:bool, tags:json",
			want: Schema{{"id", TypeInt}, {"name", TypeText}, {"price", TypeFloat}, {"ok", TypeBool}, {"tags", TypeJSON}}},
		{in: "a:number,b:string, c : object ,d:array,e:timestamp",
			want: Schema{{"a", TypeFloat}, {"b", TypeText}, {"c", TypeObject}, {"d", TypeArray}, {"e", TypeTimestamp}}},
		{in: "id:int, price float", err: `schema entry 2 "price float": want name:type`},
		{in: "id:int, x:decimal", err: `schema entry 2 "x:decimal": unknown type "decimal" (want one of int, float, number, text, string, bool, json, object, array, timestamp)`},
		{in: ":int", err: `schema entry 1 ":int": empty field name`},
		{in: "id:", err: `schema entry 1 "id:": empty type`},
		{in: "id:int,", err: `schema entry 2 "": empty entry`},
		{in: "id:int, id:text", err: `schema entry 2 "id:text": field "id" declared twice`},
		{in: "id:INT", err: `schema entry 1 "id:INT": unknown type "INT"`},
	}
	for _, tt := range tests {
		got, err := ParseSchema(tt.in)
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ParseSchema(%q) error = %v, want prefix %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSchema(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if again, err := ParseSchema(got.String()); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("ParseSchema(%q.String()) = %v, %v", tt.in, again, err)
		}
	}
}

func TestFits(t *testing.T) {
	tests := []struct {
		declared Type
		doc      string // {"v": …}
		want     bool
	}{
		{TypeInt, `1`, true},
		{TypeInt, `-0`, true},
		{TypeInt, `2.000`, true},
		{TypeInt, `1.5e1`, true},
		{TypeInt, `25e-1`, false},
		{TypeInt, `1e400`, true},
		{TypeInt, `1.5e-99999999999999999999`, false},
		{TypeInt, `0e-5`, true},
		{TypeInt, `123456789012345678901234567890`, true},
		{TypeInt, `1.5`, false},
		{TypeInt, `"1"`, false},
		{TypeFloat, `1.5`, true},
		{TypeFloat, `1`, true},
		{TypeFloat, `"1.5"`, false},
		{TypeText, `"x"`, true},
		{TypeText, `1`, false},
		{TypeBool, `false`, true},
		{TypeBool, `"true"`, false},
		{TypeObject, `{"a":[1]}`, true},
		{TypeObject, `[]`, false},
		{TypeArray, `[{"a":"]"}]`, true},
		{TypeArray, `{}`, false},
		{TypeJSON, `[1]`, true},
		{TypeJSON, `"s"`, true},
		{TypeTimestamp, `"2026-11-29T10:11:12Z"`, true},
		{TypeTimestamp, `"2026-11-29T10:11:12.123+01:00"`, true},
		{TypeTimestamp, `"2026-11-29T10:11:12\u002B01:00"`, true},
		{TypeTimestamp, `"2026-11-29 10:11:12"`, false},
		{TypeTimestamp, `1764410000`, false},
	}
	for _, tt := range tests {
		s := New(Schema{{"v", tt.declared}})
		s.Observe(persistence.Op{Kind: persistence.OpUpsert, Doc: []byte(`{"v":` + tt.doc + `}`)})
		w := s.Close("src", "n1", time.Time{}, time.Time{}, nil)
		if got := w.Fields["v"].Misfits == 0; got != tt.want {
			t.Errorf("%s fits %s = %v, want %v (window %+v)", tt.doc, tt.declared, got, tt.want, w.Fields["v"])
		}
		if w.RowsFailed != 0 {
			t.Errorf("%s: doc counted as failed", tt.doc)
		}
	}
}

func upsert(doc string) persistence.Op {
	return persistence.Op{Kind: persistence.OpUpsert, Key: "k", Doc: []byte(doc)}
}

var (
	dead = persistence.Op{Kind: persistence.OpDeadLetter, Reason: "no key"}
	del  = persistence.Op{Kind: persistence.OpDelete, Key: "k"}
)

func repeat(n int, op persistence.Op) []persistence.Op {
	out := make([]persistence.Op, n)
	for i := range out {
		out[i] = op
	}
	return out
}

func concat(parts ...[]persistence.Op) []persistence.Op {
	var out []persistence.Op
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func window(schema string, ops []persistence.Op, prev *persistence.QualityWindow) persistence.QualityWindow {
	sc, err := ParseSchema(schema)
	if err != nil {
		panic(err)
	}
	s := New(sc)
	for _, op := range ops {
		s.Observe(op)
	}
	return s.Close("orders", "node-1", time.Unix(0, 0), time.Unix(300, 0), prev)
}

func TestStatus(t *testing.T) {
	good := upsert(`{"id":1,"name":"a"}`)
	prevWin := window("", repeat(10, good), nil)
	tests := []struct {
		name   string
		schema string
		ops    []persistence.Op
		prev   *persistence.QualityWindow
		want   string
		read   int64
		failed int64
	}{
		{name: "empty", want: StatusEmpty},
		{name: "empty despite prev", prev: &prevWin, want: StatusEmpty},
		{name: "all failed", ops: repeat(3, dead), want: StatusFailed, read: 3, failed: 3},
		{name: "degraded by failures at 10%", ops: concat(repeat(9, good), repeat(1, dead)), want: StatusDegraded, read: 10, failed: 1},
		{name: "ok below 10% failures", ops: concat(repeat(10, good), repeat(1, dead)), want: StatusOK, read: 11, failed: 1},
		{name: "degraded by misfits", schema: "id:text", ops: concat(repeat(9, good), repeat(1, upsert(`{"id":"x","name":"a"}`))), want: StatusDegraded, read: 10},
		{name: "ok below 10% misfits", schema: "id:int", ops: concat(repeat(10, good), repeat(1, upsert(`{"id":"x","name":"a"}`))), want: StatusOK, read: 11},
		{name: "misfits and failures add up", schema: "id:int", ops: concat(repeat(18, good), repeat(1, upsert(`{"id":"x"}`)), repeat(1, dead)), prev: &prevWin, want: StatusDegraded, read: 20, failed: 1},
		{name: "nulls are not misfits", schema: "id:int", ops: concat(repeat(5, good), repeat(5, upsert(`{"id":null,"name":"a"}`))), want: StatusOK, read: 10},
		{name: "drift", ops: repeat(10, upsert(`{"id":1,"name":"a","new":true}`)), prev: &prevWin, want: StatusDrift, read: 10},
		{name: "no drift", ops: repeat(10, good), prev: &prevWin, want: StatusOK, read: 10},
		{name: "deletes only: ok, no drift", ops: repeat(4, del), prev: &prevWin, want: StatusOK, read: 4},
		{name: "bad doc counts failed", ops: []persistence.Op{upsert(`[1]`), upsert(`{"a":`)}, want: StatusFailed, read: 2, failed: 2},
		{name: "handler messages are read", ops: repeat(2, persistence.Op{Kind: persistence.OpMessage}), want: StatusOK, read: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := window(tt.schema, tt.ops, tt.prev)
			if w.Status != tt.want || w.RowsRead != tt.read || w.RowsFailed != tt.failed {
				t.Errorf("status %q read %d failed %d, want %q %d %d (drift %+v)", w.Status, w.RowsRead, w.RowsFailed, tt.want, tt.read, tt.failed, w.Drift)
			}
			if w.Source != "orders" || w.Node != "node-1" || !w.WindowEnd.Equal(time.Unix(300, 0)) {
				t.Errorf("window identity %q %q %v", w.Source, w.Node, w.WindowEnd)
			}
		})
	}
}

func TestFields(t *testing.T) {
	ops := []persistence.Op{
		upsert(`{"id":1,"name":"a","price":1.5,"tags":["x"]}`),
		upsert(`{"id":2,"name":null,"price":"2"}`),
		upsert(`{"id":"3","price":3,"tags":[],"extra":{}}`),
		upsert(`{"id":4,"name":"d","price":4}`),
		del, dead,
	}
	w := window("id:int, name:text, price:float, when:timestamp", ops, nil)
	want := map[string]persistence.FieldStats{
		"id":    {Present: 4, Nulls: 0, NullRate: 0, Types: map[string]int64{"number": 3, "string": 1}, Type: "number", Declared: "int", Misfits: 1},
		"name":  {Present: 3, Nulls: 2, NullRate: 0.5, Types: map[string]int64{"string": 2, "null": 1}, Type: "string", Declared: "text"},
		"price": {Present: 4, Nulls: 0, NullRate: 0, Types: map[string]int64{"number": 3, "string": 1}, Type: "number", Declared: "float", Misfits: 1},
		"tags":  {Present: 2, Nulls: 2, NullRate: 0.5, Types: map[string]int64{"array": 2}, Type: "array"},
		"extra": {Present: 1, Nulls: 3, NullRate: 0.75, Types: map[string]int64{"object": 1}, Type: "object"},
		"when":  {Present: 0, Nulls: 4, NullRate: 1, Types: map[string]int64{}, Declared: "timestamp"},
	}
	if !reflect.DeepEqual(w.Fields, want) {
		t.Errorf("fields:\n got %+v\nwant %+v", w.Fields, want)
	}
	if w.RowsRead != 6 || w.RowsFailed != 1 || w.Status != StatusDegraded { // 1 failed + 2 misfit rows of 6
		t.Errorf("read %d failed %d status %s", w.RowsRead, w.RowsFailed, w.Status)
	}
	// Ties go to the first type name; a field only ever null is "null".
	w = window("", []persistence.Op{upsert(`{"a":"x","b":null}`), upsert(`{"a":1}`)}, nil)
	if w.Fields["a"].Type != "number" || w.Fields["b"].Type != "null" {
		t.Errorf("tie type %q, null-only type %q; want number, null", w.Fields["a"].Type, w.Fields["b"].Type)
	}
}

func TestDrift(t *testing.T) {
	base := window("", repeat(8, upsert(`{"id":1,"name":"a","n":null,"gone":true}`)), nil)
	tests := []struct {
		name string
		ops  []persistence.Op
		prev *persistence.QualityWindow
		want []persistence.Drift
	}{
		{name: "no prev", ops: repeat(4, upsert(`{"x":1}`)), want: nil},
		{name: "same", ops: repeat(4, upsert(`{"id":2,"name":"b","n":null,"gone":false}`)), prev: &base, want: nil},
		{name: "added and removed", ops: repeat(4, upsert(`{"id":2,"name":"b","n":null,"new":[]}`)), prev: &base,
			want: []persistence.Drift{{Field: "gone", Change: ChangeRemoved, From: "boolean"}, {Field: "new", Change: ChangeAdded, To: "array"}}},
		{name: "retyped", ops: repeat(4, upsert(`{"id":"2","name":"b","n":null,"gone":true}`)), prev: &base,
			want: []persistence.Drift{{Field: "id", Change: ChangeRetyped, From: "number", To: "string"}}},
		{name: "null to value is not retyped", ops: repeat(4, upsert(`{"id":1,"name":"a","n":5,"gone":true}`)), prev: &base,
			want: []persistence.Drift{{Field: "n", Change: ChangeNullRate, From: "1.00", To: "0.00"}}},
		{name: "null rate up by exactly 0.25", ops: concat(repeat(3, upsert(`{"id":1,"name":"a","n":null,"gone":true}`)), repeat(1, upsert(`{"id":1,"n":null,"gone":true}`))), prev: &base,
			want: []persistence.Drift{{Field: "name", Change: ChangeNullRate, From: "0.00", To: "0.25"}}},
		{name: "null rate up by less than 0.25", ops: concat(repeat(4, upsert(`{"id":1,"name":"a","n":null,"gone":true}`)), repeat(1, upsert(`{"id":1,"n":null,"gone":true}`))), prev: &base, want: nil},
		{name: "prev without docs", ops: repeat(2, upsert(`{"a":1}`)), prev: &persistence.QualityWindow{Status: StatusFailed}, want: nil},
		{name: "current without docs", ops: repeat(2, del), prev: &base, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := window("", tt.ops, tt.prev)
			if !reflect.DeepEqual(w.Drift, tt.want) {
				t.Errorf("drift %+v, want %+v", w.Drift, tt.want)
			}
			if (len(tt.want) > 0) != (w.Status == StatusDrift) {
				t.Errorf("status %s with drift %+v", w.Status, w.Drift)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	ops := []persistence.Op{
		upsert(`{"id":1,"name":"a"}`), upsert(`{"id":"2","x":null}`), dead, del,
		upsert(`{"id":3,"name":"c","y":[1]}`), upsert(`{"id":4}`), dead,
	}
	schema := Schema{{"id", TypeInt}}
	whole := New(schema)
	for _, op := range ops {
		whole.Observe(op)
	}
	merged := New(schema)
	for _, part := range [][]persistence.Op{ops[:2], nil, ops[2:5], ops[5:]} {
		child := &Stats{} // children may not know the schema
		child.schema = schema
		for _, op := range part {
			child.Observe(op)
		}
		merged.Merge(child)
	}
	merged.Merge(nil)
	if merged.Rows() != int64(len(ops)) {
		t.Errorf("Rows() = %d, want %d", merged.Rows(), len(ops))
	}
	a := whole.Close("s", "n", time.Time{}, time.Time{}, nil)
	b := merged.Close("s", "n", time.Time{}, time.Time{}, nil)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("merged window differs:\n%+v\n%+v", a, b)
	}
	var zero Stats
	zero.Merge(whole)
	if c := zero.Close("s", "n", time.Time{}, time.Time{}, nil); !reflect.DeepEqual(a, c) {
		t.Errorf("merge into zero Stats differs:\n%+v\n%+v", a, c)
	}
	whole.Reset()
	if w := whole.Close("s", "n", time.Time{}, time.Time{}, nil); w.Status != StatusEmpty || len(w.Fields) != 0 {
		t.Errorf("after Reset: %+v", w)
	}
}

func TestMaxFields(t *testing.T) {
	s := New(Schema{{"zz_declared", TypeInt}})
	for i := range MaxFields + 10 {
		s.Observe(upsert(fmt.Sprintf(`{"f%04d":1}`, i)))
	}
	s.Observe(upsert(`{"zz_declared":"x"}`))
	other := New(nil)
	other.Observe(upsert(`{"new_in_other":1,"f0000":2}`))
	s.Merge(other)
	w := s.Close("s", "n", time.Time{}, time.Time{}, nil)
	if len(w.Fields) != MaxFields+1 {
		t.Errorf("%d fields tracked, want %d plus the declared one", len(w.Fields), MaxFields)
	}
	if w.Fields["zz_declared"].Misfits != 1 || w.Fields["f0000"].Present != 2 {
		t.Errorf("declared %+v, f0000 %+v", w.Fields["zz_declared"], w.Fields["f0000"])
	}
	if _, ok := w.Fields["new_in_other"]; ok {
		t.Errorf("a field past MaxFields was tracked")
	}
	if w.RowsRead != MaxFields+12 {
		t.Errorf("rows %d", w.RowsRead)
	}
}

func TestDue(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		rows int64
		now  time.Time
		want bool
	}{
		{0, start, false},
		{999, start.Add(299 * time.Second), false},
		{1000, start, true},
		{0, start.Add(300 * time.Second), true},
		{5, start.Add(time.Hour), true},
	}
	for _, tt := range tests {
		if got := Due(tt.rows, start, tt.now); got != tt.want {
			t.Errorf("Due(%d, +%v) = %v, want %v", tt.rows, tt.now.Sub(start), got, tt.want)
		}
	}
}

func FuzzObserve(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"\"}"}`, `{"a":[{"b":"]"}]}`, `{`, `{"a":}`, `{"a":1,}`, `[]`, ``, `{"a":1e}`, `{"\u0061":2,"a":3}`, `{"t":"2026-01-01T00:00:00Z"}`} {
		f.Add([]byte(s), uint8(0))
	}
	schema, _ := ParseSchema("a:int, b:float, t:timestamp, o:object, s:text, x:bool, y:array, j:json")
	f.Fuzz(func(t *testing.T, doc []byte, kind uint8) {
		s := New(schema)
		op := persistence.Op{Kind: persistence.OpKind(kind%5 + 1), Doc: doc}
		s.Observe(op)
		s.Observe(upsert(`{"a":1}`))
		w := s.Close("s", "n", time.Time{}, time.Time{}, &persistence.QualityWindow{Fields: map[string]persistence.FieldStats{"a": {Present: 1, Type: "string"}}})
		if w.RowsRead != 2 || w.RowsFailed > 1 {
			t.Fatalf("read %d failed %d", w.RowsRead, w.RowsFailed)
		}
		for name, fs := range w.Fields {
			if fs.Nulls < 0 || fs.NullRate < 0 || fs.NullRate > 1 || fs.Misfits > fs.Present {
				t.Fatalf("field %q: %+v", name, fs)
			}
		}
		switch w.Status {
		case StatusOK, StatusDrift, StatusDegraded, StatusFailed:
		default:
			t.Fatalf("status %q", w.Status)
		}
	})
}
