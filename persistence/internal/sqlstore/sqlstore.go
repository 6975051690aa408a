package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// CheckTimeout reports a Config.Timeout t below min; 0 (the default def)
// is accepted.
func CheckTimeout(t, min, def time.Duration) error {
	if t != 0 && t < min {
		return fmt.Errorf("timeout %s: must be at least %s (or 0 for the default %s)", t, min, def)
	}
	return nil
}

// Timeout is the bound of a Config.Timeout t: t, or def where t is 0.
func Timeout(t, def time.Duration) time.Duration {
	if t == 0 {
		return def
	}
	return t
}

// WantUnits checks InitSource's arguments and returns the units to record:
// sorted, without repeats, never nil.
func WantUnits(source string, units []string) ([]string, error) {
	if source == "" {
		return nil, errors.New("init source: empty source")
	}
	want := slices.Compact(slices.Sorted(slices.Values(units)))
	if want == nil {
		want = []string{}
	}
	return want, nil
}

// GotUnits is InitSource's answer from the units a store read back:
// sorted (in place), never nil.
func GotUnits(got []string) []string {
	if got == nil {
		got = []string{}
	}
	slices.Sort(got)
	return got
}

// QualityJSON is the JSON of a quality window's fields and drift, as
// WriteQuality stores them.
func QualityJSON(w persistence.QualityWindow) (fields, drift []byte, err error) {
	if fields, err = json.Marshal(w.Fields); err != nil {
		return nil, nil, fmt.Errorf("write quality of %s: fields: %w", w.Source, err)
	}
	if drift, err = json.Marshal(w.Drift); err != nil {
		return nil, nil, fmt.Errorf("write quality of %s: drift: %w", w.Source, err)
	}
	return fields, drift, nil
}

// PruneChunk is how many dedupe rows one statement of PruneDedupe deletes.
const PruneChunk = 10_000

// PruneInChunks calls chunk, which deletes at most PruneChunk dedupe rows
// applied before before in one statement and says how many, until a call
// deletes fewer or fails. It returns how many rows all calls deleted, and
// the failing call's error as it is.
func PruneInChunks(ctx context.Context, before time.Time, chunk func(context.Context, time.Time) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := chunk(ctx, before)
		total += n
		if err != nil {
			return total, err
		}
		if n < PruneChunk {
			return total, nil
		}
	}
}
