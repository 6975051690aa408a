package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
)

func TestTranslate(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		is        error
		retryable bool
	}{
		{"offset out of range", live, fmt.Errorf("p 0: %w", kerr.OffsetOutOfRange), brokers.ErrPositionGone, false},
		// the client found the log truncated under it: its offsets are reused
		{"data loss", live, fmt.Errorf("p 0: %w", &kgo.ErrDataLoss{Topic: "t", ConsumedTo: 9, ResetTo: 4}), brokers.ErrPositionUnknown, false},
		{"client closed", live, kgo.ErrClientClosed, brokers.ErrClosed, false},
		{"not leader", live, kerr.NotLeaderForPartition, nil, true},
		{"auth failed", live, kerr.SaslAuthenticationFailed, nil, false},
		{"topic auth", live, kerr.TopicAuthorizationFailed, nil, false},
		{"eof", live, io.EOF, nil, true},
		{"own timeout", live, context.DeadlineExceeded, nil, true},
		{"caller cancelled", cancelled, context.Canceled, context.Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(tt.ctx, "fetch", tt.err)
			if tt.is != nil && !errors.Is(got, tt.is) {
				t.Fatalf("translate = %v, want it to be %v", got, tt.is)
			}
			if brokers.Retryable(got) != tt.retryable {
				t.Fatalf("translate = %v, retryable %v, want %v", got, brokers.Retryable(got), tt.retryable)
			}
			var ke *kerr.Error
			if errors.As(got, &ke) {
				t.Fatalf("a franz-go type leaks through: %T in %v", ke, got)
			}
			if tt.ctx == live {
				var be *brokers.Error
				if !errors.As(got, &be) || be.Op != "fetch" {
					t.Fatalf("translate = %#v, want a *brokers.Error with Op fetch", got)
				}
			}
		})
	}
	if translate(live, "x", nil) != nil {
		t.Fatal("nil translated to an error")
	}
}
