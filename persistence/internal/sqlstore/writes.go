package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/persistence"
)

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
