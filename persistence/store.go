package persistence

import (
	"context"
	"fmt"
	"time"
)

// Lease is the right to apply one unit.
type Lease struct {
	Unit  string
	Owner string // node name; empty when released
	// Token fences applies: it strictly increases with every Acquire.
	Token      int64
	ExpiresAt  time.Time
	AcquiredAt time.Time
	// RenewedAt is how recently the holder reached the store, by the
	// store's clock (takeover, AcquireRequest.Stale): the later of the
	// lease's last Acquire or renewal and its owner's last heartbeat
	// (RenewLeases). Acquire, Renew, RenewLeases, List and a
	// LeaseHeldError's Holder all report it so.
	RenewedAt time.Time
	// PrevOwner and PrevToken are set only in what Acquire returns: the
	// holder of the token just before this one (PrevToken = Token-1) and
	// that token; PrevOwner is empty when the lease was released, new
	// (PrevToken 0), or when the store cannot tell. They are never stored
	// and never read by the other methods; the runtime records them in
	// its event log (a takeover names whom it took the lease from).
	PrevOwner string
	PrevToken int64
}

// AcquireRequest asks for a unit's lease.
type AcquireRequest struct {
	Unit  string
	Owner string
	TTL   time.Duration
	// Live are the members alive in the caller's membership view. A lease
	// held by an owner that is not among them is taken over when that
	// owner has stopped renewing: its RenewedAt (the later of the lease's
	// own renewal and its owner's heartbeat) is older than Stale by the
	// store's clock. A holder that still renews keeps its lease whatever
	// the caller's view says (a partition cannot make nodes take leases
	// back and forth; the store is the tie-breaker).
	Live []string
	// Stale is how long a holder absent from Live must have gone without
	// renewing before its lease is taken over; 0 takes it over at once.
	Stale time.Duration
}

// Leases manages unit leases.
type Leases interface {
	// Acquire takes the unit's lease when it is free, expired, already the
	// requester's, or held by an owner not in req.Live whose last renewal
	// is older than req.Stale. Every success increments the token and sets
	// RenewedAt. Otherwise it returns a *LeaseHeldError (which matches
	// ErrLeaseHeld).
	Acquire(ctx context.Context, req AcquireRequest) (Lease, error)
	// Renew extends a lease still held with l's token; otherwise ErrLeaseLost.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// RenewLeases is a node's renewal round, in one round trip. It writes
	// owner's heartbeat (now, by the store's clock), which renews every
	// lease owner holds for the takeover test: their RenewedAt becomes
	// now. It extends to now + ttl the ExpiresAt of each lease of ls that
	// owner still holds with its token and whose expiry is less than ttl/2
	// away, so that a row is rewritten about once per ttl/2 rather than
	// every round, and a caller renewing more often than every ttl/2 never
	// lets a lease lapse. renewed are the leases of ls owner still holds,
	// each as stored after the call (a lease not extended keeps its
	// ExpiresAt); lost names the units of ls whose lease owner no longer
	// holds with that token (as Renew's ErrLeaseLost). Lost detection is
	// exact every call, whichever leases were due. A lease in neither
	// could not be renewed this time (its row was locked by another
	// transaction) and is still held. An error means nothing is known; ls
	// is not modified. With no leases it still reaches the store and
	// writes the heartbeat: the runtime asks so every round to learn when
	// the store answers again.
	RenewLeases(ctx context.Context, owner string, ls []Lease, ttl time.Duration) (renewed []Lease, lost []string, err error)
	// Release frees a lease still held with l's token (the token is kept, so
	// the next Acquire still increments it); otherwise ErrLeaseLost.
	Release(ctx context.Context, l Lease) error
	// List returns every lease, released ones included, ordered by unit.
	List(ctx context.Context) ([]Lease, error)
}

// RenewAnswer is a renewal round's answer told as what differs from the
// leases it was given: every lease of the round's ls in none of its lists
// is renewed as given (Owner the round's owner, RenewedAt Beat). A round
// of 10,000 idle leases so answers with a few leases instead of 10,000
// (1.4 MB a round, issue 12 item 5).
type RenewAnswer struct {
	// Changed are the leases of ls still held whose stored ExpiresAt or
	// AcquiredAt differs from ls's (most often those the round
	// extended), each as stored, with RenewedAt Beat; in ls's order.
	Changed []Lease
	// Lost are the units of ls no longer held with that token, as
	// RenewLeases's lost; in ls's order.
	Lost []string
	// Skipped are the units of ls neither renewed nor lost this time
	// (their row was locked, or ls named the unit again with another
	// token); in ls's order.
	Skipped []string
	// Beat is the round's heartbeat, the RenewedAt of every lease
	// renewed.
	Beat time.Time
}

// ChangesRenewer is implemented by stores that answer a renewal round as
// a RenewAnswer.
type ChangesRenewer interface {
	// RenewLeasesChanges is RenewLeases, answered as what differs from
	// ls (RenewAnswer). ls is not modified.
	RenewLeasesChanges(ctx context.Context, owner string, ls []Lease, ttl time.Duration) (RenewAnswer, error)
}

// RenewChanges is l's RenewLeasesChanges when it has one
// (ChangesRenewer), else its RenewLeases told as a RenewAnswer
// (AnswerOf).
func RenewChanges(ctx context.Context, l Leases, owner string, ls []Lease, ttl time.Duration) (RenewAnswer, error) {
	if r, ok := l.(ChangesRenewer); ok {
		return r.RenewLeasesChanges(ctx, owner, ls, ttl)
	}
	renewed, lost, err := l.RenewLeases(ctx, owner, ls, ttl)
	if err != nil {
		return RenewAnswer{}, err
	}
	return AnswerOf(ls, renewed, lost), nil
}

// RenewLeasesOf is RenewLeases made of r's RenewLeasesChanges: the
// RenewLeases of every store that answers as a RenewAnswer.
func RenewLeasesOf(ctx context.Context, r ChangesRenewer, owner string, ls []Lease, ttl time.Duration) ([]Lease, []string, error) {
	a, err := r.RenewLeasesChanges(ctx, owner, ls, ttl)
	if err != nil {
		return nil, nil, err
	}
	return a.Renewed(owner, ls), a.Lost, nil
}

// AnswerOf tells RenewLeases's answer (renewed and lost, both in ls's
// order) to the round of ls as a RenewAnswer. Beat is the RenewedAt of
// the first lease renewed (zero when none was).
func AnswerOf(ls, renewed []Lease, lost []string) RenewAnswer {
	var a RenewAnswer
	if len(renewed) > 0 {
		a.Beat = renewed[0].RenewedAt
	}
	a.Lost = lost
	r, k := 0, 0 // into renewed, lost
	for _, l := range ls {
		switch {
		case r < len(renewed) && renewed[r].Unit == l.Unit && renewed[r].Token == l.Token:
			if nl := renewed[r]; !nl.ExpiresAt.Equal(l.ExpiresAt) || !nl.AcquiredAt.Equal(l.AcquiredAt) {
				a.Changed = append(a.Changed, nl)
			}
			r++
		case k < len(lost) && lost[k] == l.Unit:
			k++
		default:
			a.Skipped = append(a.Skipped, l.Unit)
		}
	}
	return a
}

// Renewed is RenewLeases's renewed of the round of ls that a answers,
// owner's: every lease of ls neither lost nor skipped, as changed or as
// given (Owner owner, RenewedAt a.Beat). Lost and Skipped name units, not
// tokens: when ls names a unit twice (the runtime never does) and one of
// them is lost or skipped, no copy is renewed as given, only a changed
// one (Changed names its token); the others are in neither list, which
// RenewLeases allows (not renewed this time).
func (a RenewAnswer) Renewed(owner string, ls []Lease) []Lease {
	var out []Lease
	var gone map[string]bool // the units lost or skipped
	if len(a.Lost)+len(a.Skipped) > 0 {
		gone = make(map[string]bool, len(a.Lost)+len(a.Skipped))
		for _, u := range a.Lost {
			gone[u] = true
		}
		for _, u := range a.Skipped {
			gone[u] = true
		}
	}
	c := 0 // into Changed
	for _, l := range ls {
		switch {
		case c < len(a.Changed) && a.Changed[c].Unit == l.Unit && a.Changed[c].Token == l.Token:
			out = append(out, a.Changed[c])
			c++
		case gone[l.Unit]:
		default:
			l.Owner, l.RenewedAt = owner, a.Beat
			out = append(out, l)
		}
	}
	return out
}

// CheckRenewLeases is the argument check every store's RenewLeases makes
// first: an empty owner or a TTL that is not positive is refused, naming
// how many leases were asked for.
func CheckRenewLeases(owner string, n int, ttl time.Duration) error {
	switch {
	case owner == "":
		return fmt.Errorf("renew %d leases: empty owner", n)
	case ttl <= 0:
		return fmt.Errorf("renew %d leases of %s: ttl %s: must be positive", n, owner, ttl)
	}
	return nil
}

// RenewDue reports whether RenewLeases extends a lease that expires at
// expires: when its expiry is less than ttl/2 after now.
func RenewDue(expires, now time.Time, ttl time.Duration) bool {
	return expires.Before(now.Add(ttl / 2))
}

// OpKind is what an Op does.
type OpKind uint8

const (
	// OpUpsert writes Doc under Key in the batch's table.
	OpUpsert OpKind = iota + 1
	// OpDelete removes Key from the batch's table.
	OpDelete
	// OpDeadLetter records the message as a dead letter with Reason.
	OpDeadLetter
	// OpMessage hands the message to the batch's Handle function (handler
	// mode); the store itself writes nothing for it.
	OpMessage
)

func (k OpKind) String() string {
	switch k {
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	case OpDeadLetter:
		return "dead-letter"
	case OpMessage:
		return "message"
	}
	return "unknown"
}

// Op is one decoded message of a batch.
type Op struct {
	Kind OpKind
	Key  string // record key (upsert, delete)
	Doc  []byte // JSON object (upsert)
	// DocChecked says Doc is one valid JSON value with no whitespace
	// between its tokens, as drover's decoders write it (they parse every
	// body and write its canonical form): a store may skip its own check
	// of Doc and its compaction then (SQLite does; memory checks anyway,
	// PostgreSQL's jsonb parses it). Anything else that makes ops leaves
	// it false: set on a text that is not so, SQLite stores the text as
	// given.
	DocChecked bool
	Position   string // the message's position (queues: its id)
	// MessageID is the dedupe id of a queue message; empty for streams.
	MessageID string
	// MsgKey, Payload and Reason describe a dead letter; Payload is also the
	// raw body of an OpMessage.
	MsgKey  string
	Payload []byte
	Reason  string
	// PayloadBytes is the size of the message body a dead letter's Payload
	// was cut from (dead_letter_max_bytes): Payload holds its first bytes.
	// 0, or any value up to len(Payload), means Payload is the whole body.
	PayloadBytes int
}

// Size is what the op carries to the store in bytes: its document,
// payload, keys and reason. Batches are bounded by the sum (batch_bytes).
func (o *Op) Size() int {
	return len(o.Key) + len(o.Doc) + len(o.Position) + len(o.MessageID) + len(o.MsgKey) + len(o.Payload) + len(o.Reason)
}

// Batch is what one fenced Apply writes.
type Batch struct {
	Source string
	Unit   string
	// Lease fences the batch: Apply commits only while Lease.Token is the
	// unit's current token.
	Lease Lease
	// Table is the records table upserts and deletes go to, created on
	// first use. It must be a valid identifier (ValidTable).
	Table string
	// Ops in message order.
	Ops []Op
	// Dedupe: refuse ops whose MessageID was applied before, and record the
	// new ids (queues).
	Dedupe bool
	// Checkpoint, when not empty, is the unit's new position (streams). It
	// is written only if it is after the stored one.
	Checkpoint string
	// Finished records that the unit was read to its end (a closed Kinesis
	// shard); its children may start.
	Finished bool
	// Reset writes Checkpoint as the unit's position whatever the stored
	// one is — backwards too, creating the row when there is none, and
	// clearing Finished: a resolved start (a start marker, see
	// brokers.StartPosition) or a position reset. Checkpoint must not be
	// empty.
	Reset bool
	// StreamID, with Reset, is recorded as the checkpoint's StreamID; a
	// Reset without one (a seek, a stream that names no incarnation) and a
	// batch without Reset leave the stored one as it is.
	StreamID string
	// SeekDone, when not 0, marks the seek of that id (the controls
	// table's seek_id) of the unit's control row done, in the batch's
	// fenced transaction: seek_done_id becomes SeekDone (a unit with no
	// row writes nothing). A row that marks SeekDone done already
	// (seek_done_id >= SeekDone: carried out, refused, expired by
	// Controls.ExpireSeek) fails the batch with ErrSeekDone and nothing
	// is written, so a seek is carried out at most once and never after
	// it expired. A seek writes
	// it with its Reset checkpoint; a seek the broker refuses writes it
	// alone (a batch with no ops and no checkpoint), so that it is not
	// carried out again.
	SeekDone int64
	// Handle, when set, is called inside the transaction, after fencing and
	// dedupe, with the batch's fresh OpMessage ops. Its writes through tx
	// commit or roll back with the batch. An error rolls everything back
	// and is returned as is.
	Handle func(ctx context.Context, tx Tx, ops []Op) error
}

// IdempotencyKey is "source/unit/first..last" over the batch's positions:
// handlers with outside side effects use it to detect a retried batch.
func (b *Batch) IdempotencyKey() string {
	first, last := "", ""
	if len(b.Ops) > 0 {
		first, last = b.Ops[0].Position, b.Ops[len(b.Ops)-1].Position
	}
	return b.Unit + "/" + first + ".." + last
}

// Applied reports what Apply wrote.
type Applied struct {
	Upserted     int // documents inserted or changed
	Unchanged    int // upserts whose document equalled the stored one
	Deleted      int // deletions (of keys present or not)
	DeadLettered int
	Handled      int // ops given to Handle
	// Duplicates are the message ids the dedupe table refused.
	Duplicates []string
}

// Tx is the fenced transaction a handler writes through.
type Tx interface {
	// Put upserts a JSON document under key in table; an unchanged document
	// is not rewritten.
	Put(ctx context.Context, table, key string, doc []byte) error
	// Delete removes key from table.
	Delete(ctx context.Context, table, key string) error
	// Get reads a document written before or earlier in this transaction.
	Get(ctx context.Context, table, key string) (doc []byte, ok bool, err error)
	// Exec runs SQL in the transaction (SQL stores; memory returns
	// ErrUnsupported) and returns the rows affected.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	// Raw is the driver's transaction: pgx.Tx for postgres, *sql.Tx for
	// sqlite, nil for memory.
	Raw() any
}

// Applier writes batches.
type Applier interface {
	// Apply writes the batch in one transaction fenced by b.Lease.Token.
	// An error matching ErrPermanent says the store refuses what the batch
	// holds and would refuse the same batch again (nothing was written);
	// any other error may pass on a retry. Handle's error is returned as
	// is, so a handler that returns the store's refusal of one of its
	// writes (wrapped with %w) is permanent too.
	Apply(ctx context.Context, b *Batch) (Applied, error)
}

// Checkpoint is the last applied position of a stream unit, or the start
// marker it was resolved to before anything was applied
// (brokers.IsMarker).
type Checkpoint struct {
	Unit      string
	Source    string
	Position  string
	Finished  bool
	Token     int64
	UpdatedAt time.Time
	// StreamID is the incarnation of the stream Position belongs to
	// (brokers.StreamIdentifier: a Kafka topic ID), as the last Reset
	// recorded it; empty when unknown.
	StreamID string
}

// Checkpoints reads checkpoints.
type Checkpoints interface {
	// Checkpoint returns the unit's checkpoint, or ErrNotFound.
	Checkpoint(ctx context.Context, unit string) (Checkpoint, error)
	// Checkpoints returns the checkpoints of a source's units, by unit.
	Checkpoints(ctx context.Context, source string) ([]Checkpoint, error)
}

// Record is one row of a records table.
type Record struct {
	Key       string
	Doc       []byte
	Source    string
	Unit      string
	Position  string
	UpdatedAt time.Time
}

// Records reads records tables (verification, tests, the CLI).
type Records interface {
	// Records returns up to limit rows of table with keys after afterKey,
	// ordered by key. A table never written is empty, not an error.
	Records(ctx context.Context, table, afterKey string, limit int) ([]Record, error)
}

// DeadLetterStatus is the state of a dead letter.
type DeadLetterStatus string

const (
	DeadLetterPending  DeadLetterStatus = "pending"
	DeadLetterReplayed DeadLetterStatus = "replayed"
	DeadLetterResolved DeadLetterStatus = "resolved"
)

// DeadLetter is a message that could not be applied, with its reason.
type DeadLetter struct {
	ID       int64
	Source   string
	Unit     string
	Position string
	MsgKey   string
	// Payload is the message body, or its first bytes when the body was
	// larger than dead_letter_max_bytes: see Cut.
	Payload []byte
	// PayloadBytes is the size of the message body (column payload_bytes);
	// it is len(Payload) unless the payload was cut.
	PayloadBytes  int64
	Reason        string
	Attempts      int
	Status        DeadLetterStatus
	FirstFailedAt time.Time
	LastFailedAt  time.Time
}

// Cut reports whether the payload holds only the first bytes of the
// message: such a dead letter cannot be replayed.
func (d *DeadLetter) Cut() bool { return int64(len(d.Payload)) < d.PayloadBytes }

// StoredPayloadBytes is the payload_bytes a store records for a dead-letter
// op: the size of the body its Payload was cut from, or len(Payload).
func StoredPayloadBytes(op *Op) int64 { return int64(max(op.PayloadBytes, len(op.Payload))) }

// DeadLetterFilter selects dead letters; zero fields select all.
type DeadLetterFilter struct {
	Source  string
	Status  DeadLetterStatus
	AfterID int64 // ids greater than this
	Limit   int   // 0: no limit
}

// DeadLetters manages dead letters.
type DeadLetters interface {
	// DeadLetters lists dead letters by id.
	DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error)
	// DeadLetter returns one, or ErrNotFound.
	DeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// SetDeadLetterStatus marks one replayed or resolved, or ErrNotFound.
	SetDeadLetterStatus(ctx context.Context, id int64, s DeadLetterStatus) error
}

// FieldStats describes one top-level field over a quality window.
type FieldStats struct {
	Present  int64            `json:"present"`   // rows with the field
	Nulls    int64            `json:"nulls"`     // rows where it is null or absent
	NullRate float64          `json:"null_rate"` // Nulls / rows read
	Types    map[string]int64 `json:"types"`     // JSON type -> rows
	Type     string           `json:"type"`      // the most frequent non-null type
	Declared string           `json:"declared,omitempty"`
	Misfits  int64            `json:"misfits,omitempty"` // values not of the declared type
}

// Drift is one change of a field against the previous window.
type Drift struct {
	Field  string `json:"field"`
	Change string `json:"change"` // added, removed, retyped, null_rate
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
}

// QualityWindow is the data-quality summary of one source on one node over
// a window of time or messages.
type QualityWindow struct {
	ID          int64
	Source      string
	Node        string
	WindowStart time.Time
	WindowEnd   time.Time
	RowsRead    int64
	RowsFailed  int64
	Fields      map[string]FieldStats
	Drift       []Drift
	Status      string // ok, drift, degraded, empty, failed
}

// Quality stores quality windows.
type Quality interface {
	WriteQuality(ctx context.Context, w QualityWindow) (int64, error)
	// QualityWindows returns a source's newest windows first ("" for all
	// sources), up to limit (0: all).
	QualityWindows(ctx context.Context, source string, limit int) ([]QualityWindow, error)
}

// Dedupe maintains the dedupe table.
type Dedupe interface {
	// PruneDedupe forgets message ids applied before t and returns how many.
	PruneDedupe(ctx context.Context, before time.Time) (int64, error)
}

// Sources remembers what each source was when drover first discovered it,
// so that units appearing later (new partitions, child shards) are told
// apart from those of the first deployment (architecture §7).
type Sources interface {
	// InitSource records units as the initial units of source unless the
	// source has initial units recorded already (the first caller wins),
	// and returns the recorded ones, sorted. Concurrent callers all get the
	// same answer.
	InitSource(ctx context.Context, source string, units []string) ([]string, error)
}

// Store is everything drover needs from its database.
type Store interface {
	Leases
	Applier
	Checkpoints
	Sources
	Records
	DeadLetters
	Quality
	Dedupe
	Controls
	Close() error
}
