// Launcher used by brokers/awstest: starts the kinesalite Kinesis emulator in
// memory on 127.0.0.1 and a port the operating system picks, with streams
// that become ACTIVE at once, prints "READY <port>" on stdout and exits when
// its standard input closes (the Go test binary that started it ended).
"use strict";

// kinesalite 3.3.3 never answers a GetShardIterator of type AT_TIMESTAMP
// when the shard holds no record stamped at or after the timestamp (its
// lookup waits for a first match that never comes). Kinesis answers with an
// iterator at the tip of the shard, which returns the records written
// later. The action is replaced, before kinesalite loads it, by one that
// does that: a LATEST iterator (which also checks the stream and shard) when
// no record matches, else an iterator at the first record that does.
// Every other request, including a timestamp later than the server's clock
// (refused), goes to kinesalite's own action.
const db = require("kinesalite/db");
const actionPath = require.resolve("kinesalite/actions/getShardIterator");
const getShardIterator = require(actionPath);
require.cache[actionPath].exports = function (store, data, cb) {
  if (data.ShardIteratorType !== "AT_TIMESTAMP" || data.Timestamp == null || data.Timestamp * 1000 > Date.now()) {
    return getShardIterator(store, data, cb);
  }
  const latest = Object.assign({}, data, { ShardIteratorType: "LATEST" });
  delete latest.Timestamp;
  getShardIterator(store, latest, (err, tip) => {
    if (err) return cb(err);
    const shard = db.resolveShardId(data.ShardId);
    const records = store.getStreamDb(data.StreamName).createReadStream({
      gt: db.shardIxToHex(shard.shardIx),
      lt: db.shardIxToHex(shard.shardIx + 1),
    });
    let done = false;
    const finish = (e, out) => {
      if (done) return;
      done = true;
      if (records.destroy) records.destroy();
      cb(e, out);
    };
    records.on("data", (item) => {
      if (item.value.ApproximateArrivalTimestamp >= data.Timestamp) {
        finish(null, { ShardIterator: db.createShardIterator(data.StreamName, shard.shardId, item.key.split("/")[1]) });
      }
    });
    records.on("error", (e) => finish(e));
    records.on("end", () => finish(null, tip));
  });
};

const kinesalite = require("kinesalite");

const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 100 });
// kinesalite rethrows every error of a request (its handler adds
// req.on("error", err => { throw err })): a client that closes its
// connection in the middle of a call (the tests cancel calls and cut
// connections) makes Node emit "aborted" on the request, and the throw ended
// the emulator, failing every later test. The handler is wrapped to replace
// that listener by one that ignores the error (the client is gone).
const [handleRequest] = server.listeners("request");
server.removeAllListeners("request");
server.on("request", (req, res) => {
  handleRequest(req, res);
  req.removeAllListeners("error");
  req.on("error", () => {});
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
