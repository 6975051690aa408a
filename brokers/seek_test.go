package brokers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSeekTarget(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want SeekTarget
	}{
		{"earliest", SeekTarget{Mode: Earliest, Word: true}},
		{"latest", SeekTarget{Mode: Latest, Word: true}},
		{"42", SeekTarget{From: "42"}},
		{"after:42", SeekTarget{After: "42"}},
		{"42/3", SeekTarget{From: "42/3"}},
		{"after:42/0", SeekTarget{After: "42/0"}},
		{"2026-12-01T10:00:00Z", SeekTarget{Time: at}},
		{"2026-12-01T11:00:00+01:00", SeekTarget{Time: at}},
	}
	for _, tt := range tests {
		got, err := ParseSeekTarget(tt.in)
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if got.Mode != tt.want.Mode || got.Word != tt.want.Word || !got.Time.Equal(tt.want.Time) || got.From != tt.want.From || got.After != tt.want.After {
			t.Errorf("%q = %+v, want %+v", tt.in, got, tt.want)
		}
		if tt.in == got.String() || tt.want.Time.IsZero() {
			continue
		}
		if got.String() != "2026-12-01T10:00:00Z" {
			t.Errorf("%q spelled %q", tt.in, got.String())
		}
	}
	for _, bad := range []string{"", "after:", "after:x", "-1", "yesterday", "@beginning", "2026-12-01", "42/", "/3", "after:42/x", "4/2/1"} {
		if _, err := ParseSeekTarget(bad); !errors.Is(err, ErrBadSeek) {
			t.Errorf("%q: %v, want ErrBadSeek", bad, err)
		}
	}
}

func TestDecimalBefore(t *testing.T) {
	for in, want := range map[string]string{"1": "0", "10": "9", "100": "99", "42": "41",
		"49590338271490256608559692538361571095921575989136588898": "49590338271490256608559692538361571095921575989136588897",
		"1000000000000000000000":                                   "999999999999999999999"} {
		got, ok := decimalBefore(in)
		if !ok || got != want || ComparePositions(got, in) != -1 {
			t.Errorf("decimalBefore(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := decimalBefore("000"); ok {
		t.Error("zero has a position before it")
	}
}

// TestSeekStartWithoutResolver: a stream with no Resolver or Seeker seeks a
// time to the @at marker, a position to the one before it, 0 to the
// beginning, after:p to p, and refuses latest.
func TestSeekStartWithoutResolver(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		to   string
		want string
	}{
		{"earliest", MarkerBeginning},
		{"2026-12-01T10:00:00Z", "@at:2026-12-01T10:00:00Z"},
		{"0", MarkerBeginning},
		{"7", "6"},
		{"after:7", "7"},
	}
	for _, tt := range tests {
		target, err := ParseSeekTarget(tt.to)
		if err != nil {
			t.Fatal(err)
		}
		st, err := SeekStart(ctx, plainStream{}, "0", target)
		if err != nil {
			t.Fatalf("%s: %v", tt.to, err)
		}
		if got := StartPosition(st); got != tt.want {
			t.Errorf("%s: checkpoint %s, want %s", tt.to, got, tt.want)
		}
	}
	if _, err := SeekStart(ctx, plainStream{}, "0", SeekTarget{Mode: Latest, Word: true}); !errors.Is(err, ErrBadSeek) {
		t.Fatalf("latest without a Resolver: %v", err)
	}
}

type plainStream struct{}

func (plainStream) Partitions(context.Context) ([]Partition, error)     { return nil, nil }
func (plainStream) Open(context.Context, string, Start) (Reader, error) { return nil, ErrClosed }
func (plainStream) Close() error                                        { return nil }

// A sub-position is read first after the one before it in its aggregate;
// an aggregate's first user record after the whole record before it.
func TestStartFromSubPosition(t *testing.T) {
	for in, want := range map[string]Start{"42/3": {After: "42/2"}, "42/1": {After: "42/0"}, "42/0": {After: "41"}, "0/0": {Mode: Earliest}} {
		if got := StartFrom(in); got != want {
			t.Errorf("StartFrom(%s) = %+v, want %+v", in, got, want)
		}
	}
	if _, ok := SubBefore("42"); ok {
		t.Error("a plain position has a sub-position before it")
	}
}

type subStream struct{ plainStream }

func (subStream) SubPositions() bool { return true }

// A sub-position target is refused, as the user wrote it, on a stream
// without sub-positions (Kafka, NATS: their Open cannot read "5/1"), and
// resolved on one that has them.
func TestSeekStartSubPositionNeedsTheCapability(t *testing.T) {
	ctx := context.Background()
	for _, to := range []string{"5/2", "after:5/2"} {
		target, err := ParseSeekTarget(to)
		if err != nil {
			t.Fatal(err)
		}
		_, err = SeekStart(ctx, plainStream{}, "0", target)
		if !errors.Is(err, ErrBadSeek) || !strings.Contains(err.Error(), to+" is a sub-position") {
			t.Errorf("%s on a stream without sub-positions: %v, want ErrBadSeek naming %s", to, err, to)
		}
		st, err := SeekStart(ctx, subStream{}, "0", target)
		if err != nil {
			t.Fatalf("%s on a stream with sub-positions: %v", to, err)
		}
		if want := map[string]string{"5/2": "5/1", "after:5/2": "5/2"}[to]; st.After != want {
			t.Errorf("%s: start after %q, want %q", to, st.After, want)
		}
	}
}
