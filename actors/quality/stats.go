package quality

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

const (
	// WindowRows closes a window after this many rows read.
	WindowRows int64 = 1000
	// WindowDuration closes a window after this much time.
	WindowDuration = 300 * time.Second
	// DegradedPercent: a window is degraded when its failed rows plus its
	// rows with at least one misfit value are at least this percentage of
	// its rows read (and not every row failed).
	DegradedPercent = 10
	// MaxFields bounds the distinct top-level field names one window
	// tracks, so that documents keyed by ids or timestamps cannot grow it
	// without limit. Declared fields are always tracked; other names past
	// the bound are not reported.
	MaxFields = 256
	// NullRateJump is the change of a field's null rate, up or down,
	// against the previous window that counts as drift.
	NullRateJump = 0.25
)

// Window statuses, in the order Close decides them.
const (
	StatusEmpty    = "empty"    // no rows read
	StatusFailed   = "failed"   // every row failed
	StatusDegraded = "degraded" // failed + misfit rows >= DegradedPercent of rows
	StatusDrift    = "drift"    // a field was added, removed, retyped or its null rate jumped
	StatusOK       = "ok"
)

// Drift changes.
const (
	ChangeAdded    = "added"
	ChangeRemoved  = "removed"
	ChangeRetyped  = "retyped"
	ChangeNullRate = "null_rate"
)

// Due reports whether a window that started at start and has read rows
// rows is to be closed at now: after WindowRows rows or WindowDuration.
func Due(rows int64, start, now time.Time) bool {
	return rows >= WindowRows || !now.Before(start.Add(WindowDuration))
}

// field accumulates one top-level field.
type field struct {
	present int64
	types   [nTypes]int64
	misfits int64
}

// Stats accumulates the quality of one window. It is not safe for
// concurrent use: each unit actor keeps its own for a batch and the source
// supervisor merges them into its window. The zero value is usable and
// declares no schema.
type Stats struct {
	schema     Schema
	rows       int64 // rows read: every op observed
	failed     int64 // dead letters, and upserts whose doc is not a JSON object
	docs       int64 // upserts whose doc was read
	misfitRows int64 // docs with at least one misfit value
	fields     map[string]*field
	scratch    []member
}

// New returns an empty Stats checking values against schema (nil: none).
func New(schema Schema) *Stats {
	return &Stats{schema: schema}
}

// Observe counts one decoded message. An upsert's top-level fields are
// counted; a deletion or a handler message counts as a row read; a dead
// letter counts as read and failed. An upsert whose Doc is not a JSON
// object (Record never gives one) counts as failed.
func (s *Stats) Observe(op persistence.Op) {
	s.rows++
	switch op.Kind {
	case persistence.OpDeadLetter:
		s.failed++
		return
	case persistence.OpUpsert:
	default:
		return
	}
	ms, err := members(s.scratch[:0], op.Doc)
	s.scratch = ms[:0]
	if err != nil {
		s.failed++
		return
	}
	s.docs++
	misfit := false
	for j, m := range ms {
		if j+1 < len(ms) && string(ms[j+1].name) == string(m.name) {
			continue // a duplicated name: count the last (canonical docs have none)
		}
		name := m.name[1 : len(m.name)-1] // without escapes, the raw text is the name
		if m.esc {
			text, ok := decodeString(m.name)
			if !ok {
				continue
			}
			name = []byte(text)
		}
		// Looked up as bytes: only a field seen for the first time in the
		// window allocates its name (this runs for every applied op).
		f := s.fields[string(name)]
		if f == nil {
			if f = s.field(string(name)); f == nil {
				continue
			}
		}
		f.present++
		f.types[m.typ]++
		if m.typ == jNull {
			continue // null fits every type; the null rate reports it
		}
		if t, ok := s.schema.Lookup(string(name)); ok && !fits(t, m.typ, m.val) {
			f.misfits++
			misfit = true
		}
	}
	if misfit {
		s.misfitRows++
	}
}

// field returns the accumulator of a field, nil when MaxFields other
// fields are tracked already.
func (s *Stats) field(name string) *field {
	f := s.fields[name]
	if f != nil {
		return f
	}
	if len(s.fields) >= MaxFields {
		if _, declared := s.schema.Lookup(name); !declared {
			return nil
		}
	}
	if s.fields == nil {
		s.fields = make(map[string]*field)
	}
	f = &field{}
	s.fields[name] = f
	return f
}

// Merge adds other's counts to s. other is not changed; its schema is
// taken only when s has none.
func (s *Stats) Merge(other *Stats) {
	if other == nil {
		return
	}
	if s.schema == nil {
		s.schema = other.schema
	}
	s.rows += other.rows
	s.failed += other.failed
	s.docs += other.docs
	s.misfitRows += other.misfitRows
	for _, name := range slices.Sorted(maps.Keys(other.fields)) {
		of := other.fields[name]
		f := s.field(name)
		if f == nil {
			continue
		}
		f.present += of.present
		f.misfits += of.misfits
		for t := range f.types {
			f.types[t] += of.types[t]
		}
	}
}

// Rows is the number of rows read so far.
func (s *Stats) Rows() int64 { return s.rows }

// Reset empties s for the next window, keeping its schema.
func (s *Stats) Reset() {
	*s = Stats{schema: s.schema, scratch: s.scratch[:0]}
}

// Close summarises the window; s is not changed (Reset it for the next
// window). prev is the previous window of the same source and node (nil:
// none) and is only read.
//
// Each field seen, and each declared field once the window has documents,
// is reported with Present (rows with the field), Nulls (documents where it
// is null or absent), NullRate (Nulls over the rows read that had a
// document, i.e. upserts), Types (JSON type -> rows, "null" included), Type
// (the most frequent non-null type, ties to the first name in sort order;
// "null" when only nulls were seen, "" when never present), Declared and
// Misfits (non-null values not of the declared type).
//
// Drift against prev is computed only when both windows have documents:
// added (present now, not before), removed (present before, not now),
// retyped (Type changed, neither being "null"), null_rate (NullRate moved
// by NullRateJump or more). It is sorted by field, then change.
func (s *Stats) Close(source, node string, start, end time.Time, prev *persistence.QualityWindow) persistence.QualityWindow {
	w := persistence.QualityWindow{
		Source: source, Node: node, WindowStart: start, WindowEnd: end,
		RowsRead: s.rows, RowsFailed: s.failed,
		Fields: make(map[string]persistence.FieldStats, len(s.fields)+len(s.schema)),
	}
	for name, f := range s.fields {
		fs := persistence.FieldStats{
			Present: f.present,
			Nulls:   max(0, s.docs-f.present+f.types[jNull]),
			Types:   make(map[string]int64, 2),
			Misfits: f.misfits,
		}
		best := -1
		for t, n := range f.types {
			if n == 0 {
				continue
			}
			fs.Types[jtypeNames[t]] = n
			if jtype(t) != jNull && (best < 0 || n > f.types[best] || (n == f.types[best] && jtypeNames[t] < jtypeNames[best])) {
				best = t
			}
		}
		switch {
		case best >= 0:
			fs.Type = jtypeNames[best]
		case f.types[jNull] > 0:
			fs.Type = "null"
		}
		w.Fields[name] = fs
	}
	if s.docs > 0 {
		for _, d := range s.schema {
			if _, ok := w.Fields[d.Name]; !ok {
				w.Fields[d.Name] = persistence.FieldStats{Nulls: s.docs, Types: map[string]int64{}}
			}
		}
	}
	for name, fs := range w.Fields {
		if s.docs > 0 {
			fs.NullRate = float64(fs.Nulls) / float64(s.docs)
		}
		if t, ok := s.schema.Lookup(name); ok {
			fs.Declared = string(t)
		}
		w.Fields[name] = fs
	}
	if s.docs > 0 && prev != nil {
		w.Drift = drift(prev.Fields, w.Fields)
	}
	switch {
	case s.rows == 0:
		w.Status = StatusEmpty
	case s.failed == s.rows:
		w.Status = StatusFailed
	case (s.failed+s.misfitRows)*100 >= s.rows*DegradedPercent:
		w.Status = StatusDegraded
	case len(w.Drift) > 0:
		w.Status = StatusDrift
	default:
		w.Status = StatusOK
	}
	return w
}

// drift compares two windows' fields; nil when prev had no documents.
func drift(prev, cur map[string]persistence.FieldStats) []persistence.Drift {
	had := false
	for _, fs := range prev {
		if fs.Present > 0 {
			had = true
			break
		}
	}
	if !had {
		return nil
	}
	names := slices.Sorted(maps.Keys(cur))
	for name := range prev {
		if _, ok := cur[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []persistence.Drift
	for _, name := range names {
		p, c := prev[name], cur[name]
		switch {
		case c.Present > 0 && p.Present == 0:
			out = append(out, persistence.Drift{Field: name, Change: ChangeAdded, To: c.Type})
		case c.Present == 0 && p.Present > 0:
			out = append(out, persistence.Drift{Field: name, Change: ChangeRemoved, From: p.Type})
		case c.Present > 0:
			if p.Type != c.Type && p.Type != "null" && c.Type != "null" {
				out = append(out, persistence.Drift{Field: name, Change: ChangeRetyped, From: p.Type, To: c.Type})
			}
			// A tolerance for float rounding: 0.35-0.10 is 0.2499999….
			if d := c.NullRate - p.NullRate; d >= NullRateJump-1e-9 || -d >= NullRateJump-1e-9 {
				out = append(out, persistence.Drift{Field: name, Change: ChangeNullRate,
					From: fmt.Sprintf("%.2f", p.NullRate), To: fmt.Sprintf("%.2f", c.NullRate)})
			}
		}
	}
	return out
}
