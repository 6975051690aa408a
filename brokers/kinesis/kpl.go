package kinesis

import (
	"bytes"
	"crypto/md5"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The KPL aggregation format (amazon-kinesis-producer's
// aggregation-format.md): the 4 magic bytes, a protobuf AggregatedRecord,
// and the 16-byte MD5 of the protobuf bytes.
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;  // not read
//	}
//
// The decoder is written here on protowire because the Go module of
// awslabs/kinesis-aggregation is not served by the Go module proxy this
// project builds from (README, "Kinesis KPL aggregation").
var kplMagic = []byte{0xF3, 0x89, 0x9A, 0xC2}

const kplChecksumLen = md5.Size

// HeaderExplicitHashKey is the header that carries a de-aggregated user
// record's explicit hash key, when its producer set one. Kinesis records
// have no headers otherwise; the "AWS." prefix is the one the SQS adapter
// uses for the broker's own attributes.
const HeaderExplicitHashKey = "AWS.Kinesis.ExplicitHashKey"

// userRecord is one user record of a KPL aggregate. Its slices alias the
// aggregate's bytes.
type userRecord struct {
	partitionKey    []byte
	explicitHashKey []byte // nil when the producer set none
	data            []byte
}

// isAggregate reports whether a Kinesis record's data is in the KPL
// aggregation format: it starts with the magic bytes. A plain JSON or
// text record never does (0xF3 does not begin a UTF-8 character that
// JSON allows first).
func isAggregate(data []byte) bool { return bytes.HasPrefix(data, kplMagic) }

// deaggregate appends the user records of the KPL aggregate data to out,
// in the order the aggregate holds them. An aggregate that is too short,
// whose checksum does not match, or whose protobuf is truncated or not an
// AggregatedRecord (a missing required field, a table index out of range)
// is an error saying what is wrong; out is then returned unchanged.
func deaggregate(data []byte, out []userRecord) ([]userRecord, error) {
	if len(data) < len(kplMagic)+kplChecksumLen {
		return out, fmt.Errorf("KPL aggregate of %d bytes is shorter than its magic and MD5 checksum (%d bytes)", len(data), len(kplMagic)+kplChecksumLen)
	}
	body := data[len(kplMagic) : len(data)-kplChecksumLen]
	if sum := md5.Sum(body); !bytes.Equal(sum[:], data[len(data)-kplChecksumLen:]) {
		return out, fmt.Errorf("KPL aggregate: MD5 checksum mismatch (the record is corrupt or truncated)")
	}
	var keys, hashes, records [][]byte
	err := fields(body, aggregateTypes, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			keys = append(keys, v)
		case 2:
			hashes = append(hashes, v)
		case 3:
			records = append(records, v)
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("KPL aggregate: %w", err)
	}
	start := len(out)
	for i, rec := range records {
		u, err := userRecordOf(rec, keys, hashes)
		if err != nil {
			return out[:start], fmt.Errorf("KPL aggregate: record %d: %w", i, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// userRecordOf decodes one Record message against the aggregate's tables.
func userRecordOf(rec []byte, keys, hashes [][]byte) (userRecord, error) {
	var u userRecord
	var pk, ehk uint64
	var hasPK, hasEHK, hasData bool
	err := fields(rec, recordTypes, func(num protowire.Number, v []byte) error {
		switch num {
		case 1, 2:
			// fields passes a varint's bytes: decode them.
			n, _ := protowire.ConsumeVarint(v)
			if num == 1 {
				pk, hasPK = n, true
			} else {
				ehk, hasEHK = n, true
			}
		case 3:
			u.data, hasData = v, true
		}
		return nil
	})
	switch {
	case err != nil:
		return u, err
	case !hasPK:
		return u, fmt.Errorf("no partition_key_index")
	case pk >= uint64(len(keys)):
		return u, fmt.Errorf("partition_key_index %d beyond the partition key table of %d", pk, len(keys))
	case !hasData:
		return u, fmt.Errorf("no data")
	case hasEHK && ehk >= uint64(len(hashes)):
		return u, fmt.Errorf("explicit_hash_key_index %d beyond the explicit hash key table of %d", ehk, len(hashes))
	}
	u.partitionKey = keys[pk]
	if hasEHK {
		u.explicitHashKey = hashes[ehk]
	}
	if u.data == nil {
		u.data = []byte{}
	}
	return u, nil
}

// The wire types of the fields read: AggregatedRecord's 1-3 are
// length-delimited; Record's 1 and 2 varints, 3 and 4 length-delimited.
var (
	aggregateTypes = map[protowire.Number]protowire.Type{1: protowire.BytesType, 2: protowire.BytesType, 3: protowire.BytesType}
	recordTypes    = map[protowire.Number]protowire.Type{1: protowire.VarintType, 2: protowire.VarintType, 3: protowire.BytesType, 4: protowire.BytesType}
)

// fields walks the protobuf message b and calls f with each field's number
// and value for each field in types: a length-delimited field's bytes, a
// varint's bytes as they stand. Other fields are skipped; a field of types
// with another wire type, or a truncated message, is an error naming the
// offset.
func fields(b []byte, types map[protowire.Number]protowire.Type, f func(num protowire.Number, v []byte) error) error {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fmt.Errorf("truncated protobuf at offset %d: %v", off, protowire.ParseError(n))
		}
		valOff := off + n
		want, known := types[num]
		if known && typ != want {
			return fmt.Errorf("field %d at offset %d has wire type %d, want %d", num, off, typ, want)
		}
		var v []byte
		switch {
		case known && typ == protowire.BytesType:
			v, n = protowire.ConsumeBytes(b[valOff:])
		case known && typ == protowire.VarintType:
			_, n = protowire.ConsumeVarint(b[valOff:])
			if n >= 0 {
				v = b[valOff : valOff+n]
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b[valOff:])
		}
		if n < 0 {
			return fmt.Errorf("truncated protobuf at offset %d: %v", off, protowire.ParseError(n))
		}
		if known {
			if err := f(num, v); err != nil {
				return err
			}
		}
		off = valOff + n
	}
	return nil
}
