package bench

import (
	"context"
	"errors"
	"io"
)

// IdleResult is the idle figure.
type IdleResult struct{}

// Line is the idle figure's last line.
func (r IdleResult) Line() string { return "" }

func runIdle(ctx context.Context, o Options, out io.Writer) (*IdleResult, error) {
	return nil, errors.New("not yet")
}
