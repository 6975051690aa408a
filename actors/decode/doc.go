// Package decode turns broker messages into store operations: what a
// message becomes (DESIGN §7).
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
//   - An upsert's Doc is canonical JSON (Canonical): compact, members sorted
//     by name recursively, a duplicated name keeping its last value (as
//     PostgreSQL's jsonb and encoding/json do), numbers exactly as written
//     (1e400 and 123456789012345678901234567890 survive), strings minimally
//     escaped. Equal documents give equal bytes, so a store can skip
//     rewriting an unchanged document by comparing bytes; canonicalising a
//     Doc again returns it unchanged.
//   - Every upsert Doc and key is storable by every store: bodies holding a
//     \u0000 character or a lone surrogate (which PostgreSQL's jsonb
//     refuses), and keys that are not UTF-8 text, are dead-lettered instead
//     of failing the batch.
//
// Decoding does not fold a batch: the last operation on a key wins when the
// store applies it (persistence.Fold), and positions at or below the unit's
// checkpoint are dropped by the unit actor, not here.
package decode
