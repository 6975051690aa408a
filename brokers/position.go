package brokers

import (
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
// integers of any length (Kinesis sequence numbers exceed 64 bits); they
// compare by value. The empty position is before every other; start
// markers ('@...') come next, ordered as text; then decimal positions;
// strings that are neither compare as text after the decimal ones.
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
	if ra == rankDecimal {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
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
	case isDecimal(p):
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
