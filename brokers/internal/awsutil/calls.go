package awsutil

import (
	"context"
	"sync"
)

// Begin starts a call that the adapter's Close waits for: it counts the
// call in calls and returns a context that ends with ctx or when closing
// (the stream's, queue's, reader's or receiver's lifetime) ends, and the
// function that ends the call. Call it under the lock that guards the
// closed flag the caller checked, so that Close's Wait sees the call.
func Begin(ctx, closing context.Context, calls *sync.WaitGroup) (context.Context, func()) {
	calls.Add(1)
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(closing, cancel)
	return cctx, func() {
		stop()
		cancel()
		calls.Done()
	}
}
