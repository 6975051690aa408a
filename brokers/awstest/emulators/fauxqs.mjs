// Launcher used by brokers/awstest: starts the fauxqs SQS emulator on a port
// the operating system picks, without request logs, prints "READY <port>" on
// stdout and exits when its standard input closes (the Go test binary that
// started it ended, however it ended).
import { startFauxqs } from "fauxqs";

const server = await startFauxqs({ port: 0, logger: false });
process.stdout.write(`READY ${server.port}\n`);
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
