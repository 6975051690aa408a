package postgres

import (
	"bytes"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestEncodeQueryAsPgx: the pipeline's own text[] encoding gives exactly
// the bytes, formats and result formats pgx gives for the same statement
// (no server: pgx's binary encoding is the reference).
func TestEncodeQueryAsPgx(t *testing.T) {
	m := pgtype.NewMap()
	sd := &pgconn.StatementDescription{Name: "upsert",
		ParamOIDs: []uint32{pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextOID, pgtype.Int8OID, pgtype.ByteaArrayOID, pgtype.TextArrayOID},
		Fields:    []pgconn.FieldDescription{{Name: "n", DataTypeOID: pgtype.Int8OID}}}
	cases := [][]any{
		{[]string{"k1", "", "ключ", "a\x01b"}, [][]byte{[]byte(`{"a":1}`), []byte(`{}`), {}, []byte(`"é"`)}, []string{"1", "2", "3", "4"},
			"source", int64(42), [][]byte{[]byte("p"), nil}, []string{"r"}},
		{[]string{}, [][]byte{}, []string{"only"}, "s", int64(-1), [][]byte{}, []string{}},                      // empty arrays: pgx's own
		{[]string{"x"}, [][]byte{[]byte("d"), nil}, []string{"1"}, "s", int64(0), [][]byte(nil), []string(nil)}, // a NULL element: pgx's own
	}
	for i, args := range cases {
		var ref pgx.ExtendedQueryBuilder
		if err := ref.Build(m, sd, args); err != nil {
			t.Fatal(err)
		}
		var eqb pgx.ExtendedQueryBuilder
		got, err := encodeQuery(&eqb, m, sd, args)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.name != "upsert" || !slices.Equal(got.formats, ref.ParamFormats) || !slices.Equal(got.results, ref.ResultFormats) {
			t.Fatalf("case %d: name %q formats %v results %v, want formats %v results %v", i, got.name, got.formats, got.results, ref.ParamFormats, ref.ResultFormats)
		}
		if len(got.values) != len(ref.ParamValues) {
			t.Fatalf("case %d: %d values, want %d", i, len(got.values), len(ref.ParamValues))
		}
		for j := range got.values {
			if !bytes.Equal(got.values[j], ref.ParamValues[j]) || (got.values[j] == nil) != (ref.ParamValues[j] == nil) {
				t.Errorf("case %d, parameter %d: %x, want %x", i, j+1, got.values[j], ref.ParamValues[j])
			}
		}
	}
}

// TestEncodeQueryValuesOutliveTheBuilder: a statement's encoded values
// are its own; encoding the next statement with the same builder does not
// overwrite them.
func TestEncodeQueryValuesOutliveTheBuilder(t *testing.T) {
	m := pgtype.NewMap()
	sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextOID, pgtype.TextArrayOID}}
	var eqb pgx.ExtendedQueryBuilder
	first, err := encodeQuery(&eqb, m, sd, []any{"first", []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	keep := [][]byte{slices.Clone(first.values[0]), slices.Clone(first.values[1])}
	if _, err := encodeQuery(&eqb, m, sd, []any{"other", []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	for j := range keep {
		if !bytes.Equal(first.values[j], keep[j]) {
			t.Fatalf("parameter %d of the first statement changed to %q", j+1, first.values[j])
		}
	}
}

func BenchmarkEncodeUpsert(b *testing.B) {
	m := pgtype.NewMap()
	sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextOID, pgtype.TextOID}}
	keys, docs, pos := make([]string, 500), make([][]byte, 500), make([]string, 500)
	for i := range keys {
		keys[i], pos[i] = string(rune('a'+i%26))+"-key", "12345"
		docs[i] = bytes.Repeat([]byte("x"), 200)
	}
	args := []any{keys, docs, pos, "s", "s/0"}
	b.Run("pgx", func(b *testing.B) {
		var eqb pgx.ExtendedQueryBuilder
		b.ReportAllocs()
		for b.Loop() {
			if err := eqb.Build(m, sd, args); err != nil {
				b.Fatal(err)
			}
			for _, v := range eqb.ParamValues {
				_ = slices.Clone(v) // as the pipeline kept them
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		var eqb pgx.ExtendedQueryBuilder
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeQuery(&eqb, m, sd, args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
