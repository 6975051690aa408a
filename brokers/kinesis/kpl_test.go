package kinesis

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/drover-dev/drover/internal/kinesistest"
)

func TestDeaggregate(t *testing.T) {
	want := []kinesistest.UserRecord{
		{PartitionKey: "a", Data: []byte(`{"id":1}`)},
		{PartitionKey: "b", ExplicitHashKey: "170141183460469231731687303715884105728", Data: []byte(`{"id":2}`)},
		{PartitionKey: "a", ExplicitHashKey: "5", Data: []byte{}},
	}
	agg := kinesistest.Aggregate(want...)
	if !isAggregate(agg) {
		t.Fatal("an aggregate is not recognised")
	}
	if isAggregate([]byte(`{"id":1}`)) {
		t.Fatal("a JSON record is taken for an aggregate")
	}
	got, err := deaggregate(agg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d user records, want %d", len(got), len(want))
	}
	for i, u := range got {
		w := want[i]
		if string(u.partitionKey) != w.PartitionKey || string(u.explicitHashKey) != w.ExplicitHashKey ||
			(u.explicitHashKey == nil) != (w.ExplicitHashKey == "") || !bytes.Equal(u.data, w.Data) || u.data == nil {
			t.Errorf("record %d = {%q %q %q}, want %+v", i, u.partitionKey, u.explicitHashKey, u.data, w)
		}
	}
	if got, err := deaggregate(kinesistest.Aggregate(), nil); err != nil || len(got) != 0 {
		t.Errorf("an empty aggregate = %d records, %v", len(got), err)
	}
}

// withMD5 frames a protobuf body as an aggregate with a correct checksum.
func withMD5(body []byte) []byte {
	sum := md5.Sum(body)
	return append(append(append([]byte(nil), kplMagic...), body...), sum[:]...)
}

func TestDeaggregateCorrupt(t *testing.T) {
	good := kinesistest.Aggregate(kinesistest.UserRecord{PartitionKey: "a", Data: []byte(`{"id":1}`)},
		kinesistest.UserRecord{PartitionKey: "b", Data: []byte(`{"id":2}`)})
	body := good[len(kplMagic) : len(good)-md5.Size]
	flipped := bytes.Clone(good)
	flipped[len(kplMagic)+3] ^= 0x40
	record := func(fields ...[]byte) []byte { // an aggregate of one key and one record made of fields
		var rec []byte
		for _, f := range fields {
			rec = append(rec, f...)
		}
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, "k")
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		return withMD5(protowire.AppendBytes(b, rec))
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	data := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("x"))
	for _, tt := range []struct {
		name, data, reason string
	}{
		{"too short", string(kplMagic) + "abc", "shorter than its magic and MD5 checksum"},
		{"bad checksum", string(flipped), "MD5 checksum mismatch"},
		{"cut short", string(good[:len(good)-3]), "MD5 checksum mismatch"},
		{"truncated protobuf", string(withMD5(body[:len(body)-2])), "truncated protobuf"},
		{"wrong wire type", string(withMD5(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1))), "wire type"},
		{"no partition key index", string(record(data)), "record 0: no partition_key_index"},
		{"key index out of range", string(record(varint(1, 4), data)), "partition_key_index 4 beyond the partition key table of 1"},
		{"hash index out of range", string(record(varint(1, 0), varint(2, 0), data)), "explicit_hash_key_index 0 beyond the explicit hash key table of 0"},
		{"no data", string(record(varint(1, 0))), "record 0: no data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := deaggregate([]byte(tt.data), nil)
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("deaggregate = %d records, %v; want an error saying %q", len(got), err, tt.reason)
			}
			if len(got) != 0 {
				t.Errorf("a corrupt aggregate gave %d records", len(got))
			}
		})
	}
}

// An unknown field (the records' tags, fields a later format may add) is
// skipped.
func TestDeaggregateSkipsUnknownFields(t *testing.T) {
	rec := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0)
	rec = protowire.AppendBytes(protowire.AppendTag(rec, 3, protowire.BytesType), []byte("x"))
	rec = protowire.AppendBytes(protowire.AppendTag(rec, 4, protowire.BytesType), []byte("\x0a\x01t")) // a Tag
	b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "k")
	b = protowire.AppendFixed32(protowire.AppendTag(b, 9, protowire.Fixed32Type), 7)
	b = protowire.AppendBytes(protowire.AppendTag(b, 3, protowire.BytesType), rec)
	got, err := deaggregate(withMD5(b), nil)
	if err != nil || len(got) != 1 || string(got[0].partitionKey) != "k" || string(got[0].data) != "x" {
		t.Fatalf("deaggregate = %+v, %v", got, err)
	}
}

func FuzzDeaggregate(f *testing.F) {
	f.Add(kinesistest.Aggregate(kinesistest.UserRecord{PartitionKey: "a", ExplicitHashKey: "1", Data: []byte("x")}))
	f.Add(withMD5([]byte{0x1a, 0x02, 0x08}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, data := range [][]byte{body, withMD5(body)} {
			got, err := deaggregate(data, nil)
			if err != nil && len(got) != 0 {
				t.Fatalf("records with an error: %v", err)
			}
			for _, u := range got {
				if u.data == nil || u.partitionKey == nil {
					t.Fatalf("a user record without data or key: %+v", u)
				}
			}
		}
	})
}

// BenchmarkDeaggregate decodes an aggregate of 100 user records of about
// 200 bytes (a KPL default-sized batch is up to 50 KiB) and reports user
// records per second; allocations are per aggregate.
func BenchmarkDeaggregate(b *testing.B) {
	recs := make([]kinesistest.UserRecord, 100)
	for i := range recs {
		recs[i] = kinesistest.UserRecord{PartitionKey: fmt.Sprintf("customer-%d", i%10),
			Data: fmt.Appendf(nil, `{"id":"order-%06d","customer":"customer-%d","amount":%d.25,"currency":"EUR","status":"paid","note":"%s"}`, i, i%10, i, strings.Repeat("x", 90))}
	}
	agg := kinesistest.Aggregate(recs...)
	b.SetBytes(int64(len(agg)))
	b.ReportAllocs()
	var scratch []userRecord
	for b.Loop() {
		out, err := deaggregate(agg, scratch[:0])
		if err != nil || len(out) != len(recs) {
			b.Fatal(len(out), err)
		}
		scratch = out
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}
