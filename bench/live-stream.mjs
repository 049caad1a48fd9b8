/**
 * The stream readers of `bench/live.ts`, in a worker thread of their own: a chunk's arrival is timed here,
 * where the load generator's own work and garbage collection on the main thread cannot hold it up, so the
 * latency measured is the console's. Times are absolute (`performance.timeOrigin + performance.now()`, one
 * clock for both threads). Plain JavaScript: a worker's entry is not compiled.
 *
 * workerData: { port, token, streams }. Stream 0 is parsed and its changes posted to the main thread, one
 * message per chunk: `{ kind: "changes", at, locks: [{ resource, state, token }] }` (state "removed" for a
 * removal), or `{ kind: "snapshot", at, part, parts, locks }`. The other streams (more viewers) are read and
 * dropped.
 */
import http from "node:http";
import { parentPort, workerData } from "node:worker_threads";

const { port, token, streams } = workerData;
const now = () => performance.timeOrigin + performance.now();
/** What the checks need of a lock, not the whole of it. */
const slim = (lock) => ({ resource: lock.resource, state: lock.state, token: lock.token });

function open(onChunk) {
  const req = http.get({ host: "127.0.0.1", port, path: "/api/locks/stream", headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" } }, (res) => {
    if (res.statusCode !== 200) throw new Error(`stream answered ${res.statusCode}`);
    res.setEncoding("utf8");
    res.on("data", onChunk ? (chunk) => onChunk(chunk, now()) : () => undefined);
  });
  req.on("error", () => {
    // closed at the end of a phase
  });
}

let buffer = "";
open((chunk, at) => {
  buffer += chunk;
  const changes = [];
  let end;
  while ((end = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    let event = "";
    let data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data = line.slice(6);
    }
    if (event === "lock") changes.push(slim(JSON.parse(data)));
    else if (event === "lock-removed") changes.push({ resource: JSON.parse(data).resource, state: "removed", token: null });
    else if (event === "snapshot") {
      const body = JSON.parse(data);
      parentPort?.postMessage({ kind: "snapshot", at, part: body.part, parts: body.parts, locks: body.locks.map(slim) });
    }
  }
  if (changes.length > 0) parentPort?.postMessage({ kind: "changes", at, locks: changes });
});
for (let i = 1; i < streams; i++) open(null);
