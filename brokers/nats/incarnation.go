package nats

import (
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxIncarnations bounds the lives of a stream a Queue remembers. A
// message of a deleted stream can only arrive in a batch pulled before
// the deletion, so the newest few are all that is ever needed.
const maxIncarnations = 8

// incarnation is one life of a stream, from its creation to its deletion.
// A stream deleted and created again under the same name starts its
// sequences at 1 again; its creation time tells the two lives apart.
type incarnation struct {
	created int64  // StreamInfo.Created, Unix nanoseconds (UTC)
	tag     string // created in decimal: the middle part of a message ID
}

// incarnations tracks the lives of a queue's stream that its messages
// come from, so that a message ID "<stream>:<created>:<sequence>" names
// the life that stored the message.
//
// The rule: every life begins after the previous one ended, and each
// message is stamped (jetstream MsgMetadata.Timestamp) by the server when
// stored. A message stamped at or before covered was stored before the
// last stream info was taken, when the newest known life was the stream's
// own, so it belongs to a known life: the newest created at or before its
// stamp. A message stamped after covered may come from a life not seen
// yet: the queue reads the stream info again (check) before naming it.
// Redeliveries keep their stamp and so their ID; a restarted process
// learns the current life at NewQueue and names its redeliveries alike.
type incarnations struct {
	mu    sync.Mutex
	known []incarnation // ascending by created; the last is the newest seen
	// covered is the stamp (Unix ns) of the stream's last message at the
	// last check that found the newest known life: no message stamped at
	// or before it comes from a later one.
	covered int64
}

// observe records what a stream info says: the stream's current life and
// how far its messages go. It reports the life known before when the
// stream turned out to be a new one.
func (in *incarnations) observe(info *jetstream.StreamInfo) (prev incarnation, recreated bool) {
	created := info.Created.UnixNano()
	last := int64(0)
	if !info.State.LastTime.IsZero() {
		last = info.State.LastTime.UnixNano()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	n := len(in.known)
	switch {
	case n > 0 && created == in.known[n-1].created:
		in.covered = max(in.covered, last)
		return incarnation{}, false
	case n > 0 && created < in.known[n-1].created:
		// An answer about a life already left behind (a reply that
		// overtook a newer one): it says nothing new.
		return incarnation{}, false
	}
	if n > 0 {
		prev, recreated = in.known[n-1], true
	}
	in.known = append(in.known, incarnation{created: created, tag: strconv.FormatInt(created, 10)})
	if len(in.known) > maxIncarnations {
		in.known = append(in.known[:0], in.known[len(in.known)-maxIncarnations:]...)
	}
	in.covered = last
	return prev, recreated
}

// covers reports whether a message stamped at stamp (Unix ns) belongs to
// a life already known.
func (in *incarnations) covers(stamp int64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.known) > 0 && stamp <= in.covered
}

// newest is the newest life known.
func (in *incarnations) newest() incarnation {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.known) == 0 {
		return incarnation{}
	}
	return in.known[len(in.known)-1]
}

// tag names the life that stored a message stamped at stamp: the newest
// known one created at or before it, else the oldest known.
func (in *incarnations) tag(stamp int64) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := len(in.known) - 1; i > 0; i-- {
		if in.known[i].created <= stamp {
			return in.known[i].tag
		}
	}
	if len(in.known) == 0 {
		return ""
	}
	return in.known[0].tag
}

// createdTime turns a tag's creation time back into a time for logs.
func (i incarnation) createdTime() time.Time { return time.Unix(0, i.created).UTC() }
