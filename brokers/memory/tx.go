package memory

import (
	"errors"
	"fmt"
	"slices"

	"github.com/drover-dev/drover/brokers"
)

// ErrTxDone is returned by a Tx call after the transaction ended: it was
// committed or aborted, its partition was closed by a reshard, or the
// stream was recreated.
var ErrTxDone = errors.New("memory stream: transaction already ended")

// Why a transaction ended without Commit or Abort.
const (
	reasonRecreated = "the stream was recreated"
	reasonReshard   = "its partition was closed by a reshard"
)

type txState int

const (
	txOpen txState = iota
	txCommitted
	txAborted
)

// Tx is a transaction writing to one partition of a Stream, as a Kafka
// transactional producer does, seen by readers as Kafka's read_committed
// consumers see it:
//
//   - Its records take their offsets at once (Produce returns them) but stay
//     invisible while it is open. The partition's last stable offset (LSO)
//     is the first offset of its oldest open transaction: readers stop
//     there, so messages written after it, transactional or not, wait until
//     it ends.
//   - Commit and Abort each write a control marker, one offset after the
//     transaction's records (and whatever was written meanwhile), which no
//     reader returns. Committed records then become readable in place;
//     aborted ones are never returned. Readers step over markers and aborted
//     records, so the positions they return have gaps.
//   - A transaction that wrote nothing holds no offset and writes no marker
//     (Kafka adds a partition to a transaction with its first record).
//
// A Tx is used from one goroutine at a time; its calls take the stream's
// lock.
type Tx struct {
	s *Stream
	p *partition
	// Guarded by s.mu.
	first int64 // offset of the first record; -1 before any
	state txState
	ended string // why it ended, when not by Commit or Abort
}

// BeginTx starts a transaction on partition, which must be open.
func (s *Stream) BeginTx(partition string) (*Tx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.openPartitionLocked("begin transaction", partition)
	if err != nil {
		return nil, err
	}
	return &Tx{s: s, p: p, first: -1}, nil
}

// Produce appends msgs to the transaction's partition and returns their
// positions, as Stream.Produce does; they stay invisible until Commit.
func (tx *Tx) Produce(msgs ...brokers.Message) ([]string, error) {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := tx.checkLocked("produce"); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	if tx.first < 0 {
		tx.first = tx.p.end()
		tx.p.openTx = append(tx.p.openTx, tx)
	}
	return s.appendLocked(tx.p, tx, msgs), nil
}

// Commit ends the transaction: its records become readable.
func (tx *Tx) Commit() error { return tx.end("commit", txCommitted) }

// Abort ends the transaction: its records are never returned.
func (tx *Tx) Abort() error { return tx.end("abort", txAborted) }

func (tx *Tx) end(op string, state txState) error {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := tx.checkLocked(op); err != nil {
		return err
	}
	s.endTxLocked(tx, state)
	return nil
}

func (tx *Tx) checkLocked(op string) error {
	if tx.s.closed {
		return &brokers.Error{Op: "transaction " + op, Err: brokers.ErrClosed}
	}
	if tx.state == txOpen {
		// A transaction that wrote nothing is not one of its partition's
		// open ones: it learns here that the partition is no more.
		switch {
		case tx.p.gone:
			tx.state, tx.ended = txAborted, reasonRecreated
		case tx.p.closed:
			tx.state, tx.ended = txAborted, reasonReshard
		default:
			return nil
		}
	}
	switch {
	case tx.ended != "":
		return fmt.Errorf("memory stream: transaction %s on partition %s: aborted because %s: %w", op, tx.p.id, tx.ended, ErrTxDone)
	case tx.state == txCommitted:
		return fmt.Errorf("memory stream: transaction %s on partition %s: already committed: %w", op, tx.p.id, ErrTxDone)
	}
	return fmt.Errorf("memory stream: transaction %s on partition %s: already aborted: %w", op, tx.p.id, ErrTxDone)
}

// endTxLocked commits or aborts an open tx: it writes the marker when tx
// holds records and wakes the partition's readers.
func (s *Stream) endTxLocked(tx *Tx, state txState) {
	tx.state = state
	if tx.first < 0 {
		return
	}
	p := tx.p
	p.openTx = slices.DeleteFunc(p.openTx, func(o *Tx) bool { return o == tx })
	marker := brokers.Message{Time: s.clock.Now()}
	s.appendLocked(p, tx, []brokers.Message{marker})
	p.recs[len(p.recs)-1].marker = true
	p.notify()
}
