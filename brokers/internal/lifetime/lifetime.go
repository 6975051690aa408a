// Package lifetime is the lifetime of an adapter's connection, queue,
// receiver or reader: a context cancelled when it closes, under which each
// call runs, and the mapping of a call's error that tells a close apart
// from the caller's cancellation. The NATS and Pub/Sub adapters use it;
// every adapter closes its stream or queue once through Shut or ShutAll,
// and a reader or receiver closed on its own leaves the set through Leave.
package lifetime

import (
	"context"
	"errors"

	"github.com/drover-dev/drover/brokers"
)

// Life is one lifetime. The zero value is not usable; call New or Child.
// It is safe for concurrent use.
type Life struct {
	ctx       context.Context
	cancel    context.CancelFunc
	translate func(op string, err error) error
}

// New returns a lifetime that ends with parent or Close. translate maps a
// call's error that is neither the close's nor the caller's (Finish).
func New(parent context.Context, translate func(op string, err error) error) Life {
	ctx, cancel := context.WithCancel(parent)
	return Life{ctx: ctx, cancel: cancel, translate: translate}
}

// Child returns a lifetime that ends with l or its own Close, mapping
// errors as l does.
func (l Life) Child() Life { return New(l.ctx, l.translate) }

// Context is cancelled when the lifetime ends.
func (l Life) Context() context.Context { return l.ctx }

// Close ends the lifetime: every call in flight under Op ends.
func (l Life) Close() { l.cancel() }

// Closed reports whether the lifetime has ended.
func (l Life) Closed() bool { return l.ctx.Err() != nil }

// Check is what a call checks before it starts: ErrClosed under op when
// the lifetime has ended, else ctx's error (nil while ctx lives).
func (l Life) Check(ctx context.Context, op string) error {
	if l.Closed() {
		return ClosedErr(op)
	}
	return ctx.Err()
}

// Op returns a context for one call: it ends when ctx ends or l closes.
func (l Life) Op(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return octx, func() {
		stop()
		cancel()
	}
}

// Finish maps the error of a call that ran under Op: ErrClosed (not
// retryable) when the close ended it, the caller's ctx.Err() when the
// caller did, else err translated.
func (l Life) Finish(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if l.Closed() {
		return ClosedErr(op)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return l.translate(op, err)
}

// ClosedErr is the error of a call on a closed lifetime.
func ClosedErr(op string) error {
	return &brokers.Error{Op: op, Err: brokers.ErrClosed}
}

// Translate is the part of an adapter's error translation that is the same
// for every adapter: nil stays nil, an error that already is a
// *brokers.Error passes unchanged, anything else is what f makes of it.
func Translate(op string, err error, f func(op string, err error) error) error {
	if err == nil {
		return nil
	}
	var be *brokers.Error
	if errors.As(err, &be) {
		return err
	}
	return f(op, err)
}
