// Launcher used by brokers/awstest: starts the kinesalite Kinesis emulator in
// memory on 127.0.0.1 and a port the operating system picks, with streams
// that become ACTIVE at once, prints "READY <port>" on stdout and exits when
// its standard input closes (the Go test binary that started it ended).
"use strict";
const kinesalite = require("kinesalite");

const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 100 });
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`READY ${server.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
