package open

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

type reader struct{}

func (*reader) Fetch(context.Context, int, time.Duration) (brokers.Result, error) {
	return brokers.Result{}, nil
}
func (*reader) Close() error { return nil }

type receiver struct{ reader }

func (*receiver) Receive(context.Context, int, time.Duration) (brokers.Result, error) {
	return brokers.Result{}, nil
}
func (*receiver) Ack(context.Context, []brokers.Message) error { return nil }
func (*receiver) Nack(context.Context, []brokers.Message, time.Duration) error {
	return nil
}

func TestNoTypedNil(t *testing.T) {
	boom := errors.New("boom")
	if r, err := Reader((*reader)(nil), boom); r != nil || err != boom {
		t.Fatalf("failed open = %v, %v; want a nil interface and the error", r, err)
	}
	if r, err := Receiver((*receiver)(nil), boom); r != nil || err != boom {
		t.Fatalf("failed open = %v, %v; want a nil interface and the error", r, err)
	}
	want := &reader{}
	if r, err := Reader(want, nil); r != want || err != nil {
		t.Fatalf("open = %v, %v; want the reader", r, err)
	}
}
