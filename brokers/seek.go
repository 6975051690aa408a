package brokers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBadSeek marks a seek target that is wrong as asked (not a position,
// a time or a word drover knows), or one the source cannot seek to (a
// queue).
var ErrBadSeek = errors.New("bad seek target")

// Seeker is implemented by streams that name the position a time seek
// starts from (Kafka ListOffsets by timestamp, JetStream's message get by
// start time), so that the checkpoint a seek writes is a position. Its
// result has the forms Resolver's has: Start{After: p} where p is the
// position just before the first message the broker stamped at or after t
// (the newest position when there is none), or Start{Mode: Earliest} when
// that first message is the partition's very first. A stream without it is
// sought to Start{At: t}, the "@at:" start marker its Open resolves
// (Kinesis AT_TIMESTAMP).
type Seeker interface {
	PositionAt(ctx context.Context, partition string, t time.Time) (Start, error)
}

// FromSeeker is implemented by streams whose positions are not
// consecutive numbers (Kinesis sequence numbers), so that "the position
// just before pos" is not pos - 1: PositionFrom returns the Start that
// reads pos first, or an error wrapping ErrBadSeek saying what to ask
// instead. Streams without it are sought to Start{After: pos - 1}.
type FromSeeker interface {
	PositionFrom(ctx context.Context, partition, pos string) (Start, error)
}

// SubPositioner is implemented by streams whose positions include
// sub-positions "<n>/<i>", a user record inside an aggregated record
// (Kinesis KPL aggregates, the memory broker's ProduceAggregate), when
// SubPositions says true. SeekStart refuses a sub-position target on any
// other stream (Kafka offsets and JetStream sequences have none), naming
// the position asked, so that a seek there is refused at once rather than
// turned into a start the stream's Open cannot read.
type SubPositioner interface {
	SubPositions() bool
}

// SeekTarget is a parsed seek target (architecture §7, drover seek).
type SeekTarget struct {
	// Mode is Earliest or Latest when the target is one of those words.
	Mode StartMode
	// Word is set for "earliest" and "latest".
	Word bool
	// Time, when not zero, is an RFC 3339 time: the first message stamped
	// at or after it.
	Time time.Time
	// From is a position the next read starts at (the message at From is
	// read again); After is one it starts just past ("after:<position>").
	From, After string
}

// ParseSeekTarget reads a seek target: a position, "earliest", "latest",
// an RFC 3339 time, or "after:<position>". Positions are decimal, as every
// stream adapter's are (Kafka offsets, Kinesis sequence numbers, JetStream
// stream sequences, the memory broker's offsets), or sub-positions
// "<decimal>/<decimal>" (a user record inside a Kinesis KPL aggregate).
func ParseSeekTarget(to string) (SeekTarget, error) {
	to = strings.TrimSpace(to)
	switch {
	case to == "":
		return SeekTarget{}, fmt.Errorf("%w: empty target (a position, earliest, latest, an RFC 3339 time or after:<position>)", ErrBadSeek)
	case to == "earliest":
		return SeekTarget{Mode: Earliest, Word: true}, nil
	case to == "latest":
		return SeekTarget{Mode: Latest, Word: true}, nil
	case strings.HasPrefix(to, "after:"):
		p := strings.TrimSpace(to[len("after:"):])
		if !isPosition(p) {
			return SeekTarget{}, fmt.Errorf("%w: after:%q is not a position (a decimal number, or <number>/<index> inside an aggregate)", ErrBadSeek, p)
		}
		return SeekTarget{After: p}, nil
	case isPosition(to):
		return SeekTarget{From: to}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, to)
	if err != nil {
		return SeekTarget{}, fmt.Errorf("%w: %q is neither a position, earliest, latest, after:<position> nor an RFC 3339 time", ErrBadSeek, to)
	}
	return SeekTarget{Time: t}, nil
}

// String spells the target as ParseSeekTarget reads it.
func (t SeekTarget) String() string {
	switch {
	case t.Word:
		return t.Mode.String()
	case !t.Time.IsZero():
		return t.Time.UTC().Format(time.RFC3339Nano)
	case t.After != "":
		return "after:" + t.After
	}
	return t.From
}

// CheckSubPosition refuses, with ErrBadSeek, a sub-position target on a
// stream that is not a SubPositioner saying true. SeekStart calls it, and
// so does a node taking a seek for a unit another node owns, so that the
// refusal comes at once rather than at the owner.
func CheckSubPosition(s Stream, partition string, t SeekTarget) error {
	if _, sub := SplitPosition(t.From + t.After); sub >= 0 {
		if sp, ok := s.(SubPositioner); !ok || !sp.SubPositions() {
			return fmt.Errorf("%w: %s is a sub-position (<number>/<index>, a user record inside a Kinesis KPL aggregate), which partition %s's stream does not have: seek to a plain position", ErrBadSeek, t, partition)
		}
	}
	return nil
}

// SeekStart resolves a target on partition of s to the Start a reader
// opens with and whose StartPosition is the checkpoint to write: the words
// as Resolver resolves them (a stream without one: Earliest is the
// beginning, Latest refused), a time by Seeker (or the "@at:" marker), a
// position From as the position just before it (the very beginning for
// 0; a FromSeeker's answer), After as itself. A sub-position target on a
// stream that is not a SubPositioner saying true is refused with
// ErrBadSeek.
func SeekStart(ctx context.Context, s Stream, partition string, t SeekTarget) (Start, error) {
	if err := CheckSubPosition(s, partition, t); err != nil {
		return Start{}, err
	}
	switch {
	case t.Word:
		if r, ok := s.(Resolver); ok {
			return r.Resolve(ctx, partition, t.Mode)
		}
		if t.Mode == Earliest {
			return Start{Mode: Earliest}, nil
		}
		return Start{}, fmt.Errorf("%w: %T cannot resolve latest", ErrBadSeek, s)
	case !t.Time.IsZero():
		if sk, ok := s.(Seeker); ok {
			return sk.PositionAt(ctx, partition, t.Time)
		}
		return Start{At: t.Time}, nil
	case t.After != "":
		return Start{After: t.After}, nil
	case t.From != "":
		if fs, ok := s.(FromSeeker); ok {
			return fs.PositionFrom(ctx, partition, t.From)
		}
		return StartFrom(t.From), nil
	}
	return Start{}, fmt.Errorf("%w: empty target", ErrBadSeek)
}

// StartFrom is the Start that reads the decimal position pos first, for
// streams whose positions are consecutive numbers: after pos - 1, or the
// very beginning for 0. A sub-position "<n>/<i>" is read first after
// "<n>/<i-1>" (SubBefore), "<n>/0" after the whole record n - 1.
func StartFrom(pos string) Start {
	if p, ok := SubBefore(pos); ok {
		return Start{After: p}
	}
	pos, _ = SplitPosition(pos)
	if p, ok := decimalBefore(pos); ok {
		return Start{After: p}
	}
	return Start{Mode: Earliest}
}

// decimalBefore is the decimal number one less than p (any length); false
// for zero.
func decimalBefore(p string) (string, bool) {
	p = strings.TrimLeft(p, "0")
	if p == "" {
		return "", false
	}
	b := []byte(p)
	i := len(b) - 1
	for b[i] == '0' {
		b[i] = '9'
		i--
	}
	b[i]--
	out := strings.TrimLeft(string(b), "0")
	if out == "" {
		out = "0"
	}
	return out, true
}

// SubBefore is the sub-position just before the sub-position pos inside
// the same aggregate: "<n>/<i-1>" for "<n>/<i>" with i > 0. It is false
// for the first user record of an aggregate and for any other position.
func SubBefore(pos string) (string, bool) {
	seq, sub := SplitPosition(pos)
	if sub <= 0 {
		return "", false
	}
	return SubPosition(seq, sub-1), true
}
