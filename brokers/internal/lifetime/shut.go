package lifetime

import (
	"context"
	"sync"
)

// Shut marks a parent (a stream, a queue) closed under mu and reports
// whether this call did: false when it was closed already, so that a
// second Close is harmless.
func Shut(mu *sync.Mutex, closed *bool) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	*closed = true
	return true
}

// ShutAll is Shut for a parent that keeps its open children (readers,
// receivers) in a set guarded by mu: the call that closes it also takes
// every child out of the set and returns them, to be closed outside the
// lock.
func ShutAll[T comparable](mu *sync.Mutex, closed *bool, children map[T]struct{}) ([]T, bool) {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return nil, false
	}
	*closed = true
	taken := make([]T, 0, len(children))
	for c := range children {
		taken = append(taken, c)
	}
	clear(children)
	return taken, true
}

// Leave takes a child that closes on its own out of its parent's set,
// under mu.
func Leave[T comparable](mu *sync.Mutex, children map[T]struct{}, child T) {
	mu.Lock()
	defer mu.Unlock()
	delete(children, child)
}

// Add makes a child of an open parent: mk runs under mu, unless ctx has
// ended (its error) or the parent is closed (ErrClosed under op).
func Add[T any](ctx context.Context, mu *sync.Mutex, closed *bool, op string, mk func() *T) (*T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return nil, ClosedErr(op)
	}
	return mk(), nil
}
