package brokers

import "strings"

// ComparePositions orders two positions of one partition: -1 when a is
// before b, 0 when equal, +1 when after. Positions are unsigned decimal
// integers of any length (Kinesis sequence numbers exceed 64 bits); they
// compare by value. Strings that are not decimal compare as text after the
// decimal ones. The empty position is before every other.
func ComparePositions(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	da, db := isDecimal(a), isDecimal(b)
	switch {
	case da && db:
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case da:
		return -1
	case db:
		return 1
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
