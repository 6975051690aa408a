// Package decode turns broker messages into store operations: what a
// message becomes (architecture §7).
//
// Config.Record decodes a records-mode message into exactly one
// persistence.Op: an upsert of a canonical JSON document under its key, a
// deletion of a key, or a dead letter with a short, stable reason. Config.Raw
// wraps a handler-mode message. Both are pure functions: no clock, no I/O,
// no goroutines, no shared state; they are safe to call from any goroutine.
//
// Guarantees:
//   - Every message gives exactly one op; nothing panics, whatever the body
//     (the fuzz test checks it). A message that cannot be applied becomes a
//     dead letter and never blocks its unit.
//   - A dead letter is bounded whatever the message: its payload is the
//     body cut at MaxDeadLetterBytes (default 256 KiB; PayloadBytes then
//     records the whole size, and replay refuses it), its reason at
//     MaxReasonBytes. So a batch of oversize messages stays as small as
//     the cut allows and can always commit.
//   - An upsert's Doc is canonical JSON (Canonical): compact, members sorted
//     by name recursively, a duplicated name keeping its last value (as
//     PostgreSQL's jsonb and encoding/json do), numbers exactly as written
//     (1e400 and 123456789012345678901234567890 survive), strings minimally
//     escaped. Equal documents give equal bytes, so a store can skip
//     rewriting an unchanged document by comparing bytes; canonicalising a
//     Doc again returns it unchanged.
//   - Every upsert Doc and key is storable by every store, so that one bad
//     message cannot fail its batch and block its unit. Checked against
//     PostgreSQL 15: bodies holding a \u0000 character or a lone surrogate
//     (jsonb refuses both), numbers beyond numeric's range (more than
//     131072 digits before the point or 16383 after), keys that are not
//     UTF-8 text or contain NUL, and keys over MaxKeyBytes (B-tree entries
//     are limited to 2704 bytes) are dead-lettered.
//
// Decoding does not fold a batch: the last operation on a key wins when the
// store applies it (persistence.Fold), and positions at or below the unit's
// checkpoint are dropped by the unit actor, not here.
package decode
