/**
 * The nodes' latency during the start-up reconcile of `bench/live.ts`, in a process of its own: a PING to each
 * node every 10 ms, timed here, where the load generator's work and garbage collection cannot hold the replies
 * up (with `--pin` this process runs on the nodes' CPU). Plain JavaScript, as the stream readers.
 *
 * argv: the nodes' ports. On a line on stdin (or its end), it stops and writes every round trip (ms) to stdout,
 * as a JSON array.
 */
import net from "node:net";

const ports = process.argv.slice(2).map(Number);
const samples = [];
let running = true;

function loop(port) {
  const socket = net.connect(port, "127.0.0.1");
  socket.setNoDelay(true);
  let sentAt = 0;
  const ping = () => {
    if (!running) return socket.destroy();
    sentAt = performance.now();
    socket.write("PING\r\n");
  };
  socket.on("connect", ping);
  socket.on("data", () => {
    // One "+PONG\r\n" per PING: one outstanding at a time, so any data is its reply.
    samples.push(performance.now() - sentAt);
    setTimeout(ping, 10);
  });
  socket.on("error", () => undefined);
}

for (const port of ports) loop(port);
const stop = () => {
  if (!running) return;
  running = false;
  process.stdout.write(`${JSON.stringify(samples)}\n`, () => process.exit(0));
};
process.stdin.on("data", stop);
process.stdin.on("end", stop);
