package brokers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"retryable Error", &Error{Op: "fetch", Retryable: true, Err: io.EOF}, true},
		{"final Error", &Error{Op: "fetch", Err: io.EOF}, false},
		{"wrapped retryable Error", fmt.Errorf("unit 3: %w", &Error{Op: "fetch", Retryable: true, Err: io.EOF}), true},
		{"wrapped final Error", fmt.Errorf("unit 3: %w", &Error{Op: "open", Err: ErrPositionGone}), false},
		{"the Error's flag wins over its sentinel", &Error{Op: "fetch", Retryable: true, Err: ErrClosed}, true},
		{"bare ErrClosed", ErrClosed, false},
		{"wrapped ErrUnknownPartition", fmt.Errorf("open 7: %w", ErrUnknownPartition), false},
		{"bare ErrPositionGone", fmt.Errorf("fetch 2: %w", ErrPositionGone), false},
		{"other error", errors.New("connection reset"), true},
		{"context error", context.DeadlineExceeded, true},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("%s: Retryable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestErrorTextAndUnwrap(t *testing.T) {
	err := &Error{Op: "list partitions", Err: ErrClosed}
	if got, want := err.Error(), "list partitions: broker: closed"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), ErrClosed) {
		t.Fatal("errors.Is does not find the sentinel inside an *Error")
	}
}
