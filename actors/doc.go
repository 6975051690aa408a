// Package actors is drover's runtime on protoactor-go: the node root, one
// source supervisor per configured source, and one unit actor per partition,
// shard or queue slot this node owns (architecture §3;
// the unit actor's life cycle is §13).
//
// A unit actor holds its unit's lease, fetches a batch, decodes it, applies
// it with its checkpoint in one fenced store call, acknowledges it (queues),
// renews its lease when due, and repeats. It never blocks its mailbox: every
// broker and store call runs through the injected exec.Executor and its
// result comes back as a message; the job's context is cancelled when the
// actor stops or restarts.
//
// A fetch is applied in batches of at most SourceSpec.BatchBytes, one after
// the other, in order, each with its checkpoint. A failed batch is retried
// as the very same batch, unless the store refused it for what it holds
// (persistence.ErrPermanent): then it is split in two, halves applied in
// order, down to the single records the store refuses alone, which are
// dead-lettered with the store's message, so that no record can block its
// unit. Dead letters keep at most SourceSpec.MaxDeadLetterBytes of the
// body; one cut so cannot be replayed (Replay refuses it).
//
// Everything that varies is injected through Env: clock, randomness, the
// protoactor dispatcher, the executor, membership, brokers and store. The
// package itself starts no goroutines and reads no wall clock; with the
// testkit's Env a whole cluster runs on one goroutine in virtual time.
package actors
