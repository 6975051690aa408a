package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// encodeQuery encodes one statement of a pipeline: what pgx's
// ExtendedQueryBuilder gives, except that the text[] arguments (a batch's
// keys, documents and positions) are written here, in PostgreSQL's binary
// array format, straight from the slices. pgx boxes every element of an
// array into an interface and rebuilds its parameter buffer from 256
// bytes for every statement; for a 500-row upsert that was about 500
// allocations and 400 KB of garbage per array.
func encodeQuery(eqb *pgx.ExtendedQueryBuilder, m *pgtype.Map, sd *pgconn.StatementDescription, args []any) (encodedQuery, error) {
	own := make([]bool, len(args))
	mine := 0
	for j, arg := range args {
		if j < len(sd.ParamOIDs) && sd.ParamOIDs[j] == pgtype.TextArrayOID && textArrayLen(arg) > 0 {
			own[j] = true
			mine++
		}
	}
	pass := args
	if mine > 0 {
		// pgx encodes the others, and an empty array in the place of each
		// of ours, so that formats and result formats are its own.
		pass = slices.Clone(args)
		for j := range pass {
			if own[j] {
				pass[j] = []string{}
			}
		}
	}
	if err := eqb.Build(m, sd, pass); err != nil {
		return encodedQuery{}, err
	}
	if len(eqb.ParamValues) != len(args) {
		return encodedQuery{}, fmt.Errorf("encode: %d parameters for %d arguments", len(eqb.ParamValues), len(args))
	}
	eq := encodedQuery{name: sd.Name, formats: slices.Clone(eqb.ParamFormats), results: slices.Clone(eqb.ResultFormats),
		values: make([][]byte, len(args))}
	for j, v := range eqb.ParamValues {
		if own[j] {
			eq.values[j], eq.formats[j] = appendTextArray(nil, args[j]), pgtype.BinaryFormatCode
			continue
		}
		eq.values[j] = slices.Clone(v)
	}
	return eq, nil
}

// textArrayLen is the number of elements of a []string, or of a [][]byte
// without nil elements (a nil would be NULL: left to pgx); 0 for anything
// else.
func textArrayLen(arg any) int {
	switch v := arg.(type) {
	case []string:
		return len(v)
	case [][]byte:
		for _, e := range v {
			if e == nil {
				return 0
			}
		}
		return len(v)
	}
	return 0
}

// appendTextArray appends a non-empty []string or [][]byte (no nil
// elements: textArrayLen) as a one-dimensional text[] in binary format:
// dimensions 1, no NULLs, the element type, the length with lower bound
// 1, then each element as its length and its bytes.
func appendTextArray(buf []byte, arg any) []byte {
	n, size := 0, 20
	switch v := arg.(type) {
	case []string:
		n = len(v)
		for _, s := range v {
			size += 4 + len(s)
		}
	case [][]byte:
		n = len(v)
		for _, b := range v {
			size += 4 + len(b)
		}
	}
	buf = slices.Grow(buf, size)
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // no NULLs
	buf = binary.BigEndian.AppendUint32(buf, pgtype.TextOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	switch v := arg.(type) {
	case []string:
		for _, s := range v {
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
			buf = append(buf, s...)
		}
	case [][]byte:
		for _, b := range v {
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
			buf = append(buf, b...)
		}
	}
	return buf
}

// pipeTrace reports a pipeline to the connection's tracer (a
// pgx.BatchTracer, as pgx reports a SendBatch) as one batch of the
// statements sent: one round trip. Without such a tracer it does nothing.
type pipeTrace struct {
	ctx  context.Context
	t    pgx.BatchTracer
	conn *pgx.Conn
}

// tracePipeline starts the trace of the statements of queued that are
// sent (errs[k] == nil).
func tracePipeline(ctx context.Context, conn *pgx.Conn, queued []*pgx.Batch, errs []error) *pipeTrace {
	t, ok := conn.Config().Tracer.(pgx.BatchTracer)
	if !ok {
		return nil
	}
	all := &pgx.Batch{}
	for k, q := range queued {
		if errs[k] == nil {
			all.QueuedQueries = append(all.QueuedQueries, q.QueuedQueries...)
		}
	}
	return &pipeTrace{ctx: t.TraceBatchStart(ctx, conn, pgx.TraceBatchStartData{Batch: all}), t: t, conn: conn}
}

// query reports the result of statement q.
func (tr *pipeTrace) query(q *pgx.QueuedQuery, tag pgconn.CommandTag, err error) {
	if tr != nil && q != nil {
		tr.t.TraceBatchQuery(tr.ctx, tr.conn, pgx.TraceBatchQueryData{SQL: q.SQL, Args: q.Arguments, CommandTag: tag, Err: err})
	}
}

// end reports the end of the pipeline.
func (tr *pipeTrace) end(err error) {
	if tr != nil {
		tr.t.TraceBatchEnd(tr.ctx, tr.conn, pgx.TraceBatchEndData{Err: err})
	}
}
