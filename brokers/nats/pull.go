package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
)

// errConnLost ends a wait when the connection drops.
var errConnLost = errors.New("nats connection lost while waiting")

// pulled is what one pull got, converted as the messages arrived (so that
// converting overlaps with the network).
type pulled struct {
	msgs []converted
	// abandoned is set when a pull request may still be open on the
	// server: a message it delivers later goes nowhere (a queue gets it
	// back after AckWait; a stream reader must reposition its consumer).
	abandoned bool
}

// pull fetches up to max messages from cons, waiting up to wait for the
// first one, and returns as soon as any are there:
//
//  1. a no-wait request for max messages answers at once with what the
//     consumer has (with probe > 0, a request the server ends after probe:
//     see take);
//  2. when that is nothing and wait > 0, a request for one message waits
//     until one arrives or the server expires it (at ~90% of wait, see
//     jetstream.FetchContext), or ctx ends, or the connection drops;
//  3. when that one arrives, a request like the first for max-1 more takes
//     what came with it.
//
// ctx must end when the caller's context does or the adapter closes. The
// error is the client's or ctx's, not yet translated.
func (c *conn) pull(ctx context.Context, op string, cons jetstream.Consumer, max int, wait, probe time.Duration, conv converter) (pulled, error) {
	lost := c.lostCh()
	if err := c.ready(op); err != nil {
		return pulled{}, err
	}
	b, err := take(cons, max, probe)
	if err != nil {
		return pulled{}, err
	}
	msgs, complete, err := collect(ctx, b, lost, conv, make([]converted, 0, max))
	p := pulled{msgs: msgs, abandoned: !complete}
	switch {
	case ctx.Err() != nil:
		return p, ctx.Err()
	case len(msgs) > 0:
		return p, nil
	case err != nil:
		return p, err
	case wait <= 0:
		return p, nil
	}

	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b, err = cons.Fetch(1, jetstream.FetchContext(wctx))
	if errors.Is(err, jetstream.ErrInvalidOption) {
		return p, nil // the wait is too short to ask the server to wait
	}
	if err != nil {
		return p, err
	}
	// The first request brought nothing: its buffer takes this one's.
	msgs, complete, err = collect(wctx, b, lost, conv, msgs[:0])
	p = pulled{msgs: msgs, abandoned: !complete}
	switch {
	case ctx.Err() != nil:
		return p, ctx.Err()
	case wctx.Err() != nil:
		// Our deadline passed before the server's expiry answer came.
		return p, nil
	case len(msgs) == 0 || err != nil:
		return p, err
	case max == 1:
		return p, nil
	}

	b, err = take(cons, max-1, probe)
	if err != nil {
		return p, nil // the one message stands; the rest come next time
	}
	p.msgs, complete, _ = collect(ctx, b, lost, conv, p.msgs)
	p.abandoned = !complete
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, nil
}

// converter turns a delivered message into drover's form.
type converter func(jetstream.Msg) converted

// take asks for up to n messages that are there now: a no-wait request
// when probe is 0, else a request that the server ends after probe. A
// queue needs the latter: when the consumer has MaxAckPending messages in
// flight the server holds a no-wait request unanswered, and the client
// would give up on it only after a second.
func take(cons jetstream.Consumer, n int, probe time.Duration) (jetstream.MessageBatch, error) {
	if probe <= 0 {
		return cons.FetchNoWait(n)
	}
	return cons.Fetch(n, jetstream.FetchMaxWait(probe))
}

// collect reads and converts the batch until the client closes it, ctx ends or the
// connection drops. complete reports whether the request ended on the
// server's word (batch full, no messages, expired) rather than ours.
func collect(ctx context.Context, b jetstream.MessageBatch, lost <-chan struct{}, conv converter, out []converted) (_ []converted, complete bool, _ error) {
	ch := b.Messages()
	for {
		// Take what is already there without the three-way select: a batch
		// mostly arrives together.
		select {
		case m, ok := <-ch:
			if !ok {
				return out, true, b.Error()
			}
			out = append(out, conv(m))
			continue
		default:
		}
		select {
		case m, ok := <-ch:
			if !ok {
				return out, true, b.Error()
			}
			out = append(out, conv(m))
		case <-ctx.Done():
			return out, false, ctx.Err()
		case <-lost:
			if len(out) > 0 {
				return out, false, nil
			}
			return out, false, errConnLost
		}
	}
}

// maxErr is the error of a Fetch or Receive asked for no messages.
func maxErr(op string, max int) error {
	return &brokers.Error{Op: op, Err: fmt.Errorf("max %d must be positive", max)}
}
