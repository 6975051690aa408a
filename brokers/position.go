package brokers

import (
	"strconv"
	"strings"
	"time"
)

// Start markers. A unit's checkpoint holds the position of the last message
// applied, or, before anything was applied, the start it was resolved to
// (architecture §7): a marker. Markers begin with '@', which no broker position
// does, and order before every position (ComparePositions), so that the
// first applied message moves a checkpoint forward from its marker.
const (
	// MarkerBeginning is the very beginning of a partition.
	MarkerBeginning = "@beginning"
	markerAt        = "@at:"
)

// StartPosition is the checkpoint position that records a resolved start:
// After itself, a marker for At, or MarkerBeginning.
func StartPosition(s Start) string {
	switch {
	case s.After != "":
		return s.After
	case !s.At.IsZero():
		return markerAt + s.At.UTC().Format(time.RFC3339Nano)
	}
	return MarkerBeginning
}

// IsMarker reports whether pos is a start marker rather than the position
// of a message.
func IsMarker(pos string) bool { return strings.HasPrefix(pos, "@") }

// ParseStart turns a checkpoint position back into the Start to open a
// reader with: after the position, or the start a marker records. ok is
// false for a marker this version does not know.
func ParseStart(pos string) (s Start, ok bool) {
	switch {
	case pos == "" || pos == MarkerBeginning:
		return Start{Mode: Earliest}, true
	case strings.HasPrefix(pos, markerAt):
		t, err := time.Parse(time.RFC3339Nano, pos[len(markerAt):])
		if err != nil {
			return Start{}, false
		}
		return Start{At: t}, true
	case IsMarker(pos):
		return Start{}, false
	}
	return Start{After: pos}, true
}

// Applied is the position of the last message applied that pos records:
// pos itself, or "" for a marker (nothing applied yet).
func Applied(pos string) string {
	if IsMarker(pos) {
		return ""
	}
	return pos
}

// ComparePositions orders two positions of one partition: -1 when a is
// before b, 0 when equal, +1 when after. Positions are unsigned decimal
// integers of any length (Kinesis sequence numbers exceed 64 bits), or
// sub-positions "<decimal>/<decimal>" (a user record inside a KPL
// aggregate: the aggregate's sequence number, then the record's index in
// it). They compare by value: by the number before the slash, then a
// sub-position before the plain number (the plain number is the whole
// record, every sub-position of it included), then by the index. The empty
// position is before every other; start markers ('@...') come next,
// ordered as text; then decimal positions and sub-positions; strings that
// are neither compare as text after them.
func ComparePositions(a, b string) int {
	if a == b {
		return 0
	}
	ra, rb := positionRank(a), positionRank(b)
	if ra != rb {
		if ra < rb {
			return -1
		}
		return 1
	}
	if ra != rankDecimal {
		return strings.Compare(a, b)
	}
	sa, suba, hasa := strings.Cut(a, "/")
	sb, subb, hasb := strings.Cut(b, "/")
	if c := compareDecimal(sa, sb); c != 0 {
		return c
	}
	switch {
	case hasa && hasb:
		return compareDecimal(suba, subb)
	case hasa:
		return -1 // the whole record is after each of its sub-positions
	case hasb:
		return 1
	}
	return 0
}

// compareDecimal orders two unsigned decimal strings by value.
func compareDecimal(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// SubPosition is the position of the user record at index sub inside the
// aggregated record at position pos: "<pos>/<sub>".
func SubPosition(pos string, sub int) string { return pos + "/" + strconv.Itoa(sub) }

// SplitPosition splits a sub-position "<pos>/<sub>" into pos and sub; for
// any other position it returns pos itself and sub = -1.
func SplitPosition(p string) (pos string, sub int) {
	seq, s, ok := strings.Cut(p, "/")
	if !ok || !isDecimal(seq) || !isDecimal(s) {
		return p, -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return p, -1
	}
	return seq, n
}

const (
	rankEmpty = iota
	rankMarker
	rankDecimal
	rankText
)

func positionRank(p string) int {
	switch {
	case p == "":
		return rankEmpty
	case IsMarker(p):
		return rankMarker
	case isPosition(p):
		return rankDecimal
	}
	return rankText
}

func isDecimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isPosition reports whether s is a decimal position or a sub-position
// "<decimal>/<decimal>".
func isPosition(s string) bool {
	seq, sub, ok := strings.Cut(s, "/")
	return isDecimal(seq) && (!ok || isDecimal(sub))
}
