/**
 * The stream readers of `bench/live.ts`, in a worker thread of their own: a chunk's arrival is timed here,
 * where the load generator's own work and garbage collection on the main thread cannot hold it up, so the
 * latency measured is the console's. Times are absolute (`performance.timeOrigin + performance.now()`, one
 * clock for both threads). Plain JavaScript: a worker's entry is not compiled.
 *
 * workerData: { port, token, streams, encoding }: every stream is opened with `encoding` (`compact`, as a tab opens
 * it, or `full`). Stream 0 is parsed and its changes posted to the main thread, one
 * message per chunk: `{ kind: "changes", at, locks: [{ resource, state, token }] }` (state "removed" for a
 * removal), or `{ kind: "snapshot", at, part, parts, locks }`. The other streams (more viewers) are read and
 * dropped, each posting `{ kind: "snapshot-through" }` once its snapshot has come.
 */
import http from "node:http";
import { parentPort, workerData } from "node:worker_threads";

const { port, token, streams, encoding } = workerData;
const now = () => performance.timeOrigin + performance.now();
/** What the checks need of a lock, not the whole of it (a compact lock: fields 0, 2 and 8, see lib/locks/compact-lock.ts). */
const slim = (lock) => (Array.isArray(lock) ? { resource: lock[0], state: lock[2], token: lock[8] } : { resource: lock.resource, state: lock.state, token: lock.token });

/** `onChunk` gets text; `onBytes`, the raw bytes (a stream read and dropped is not decoded). */
function open(onChunk, onBytes) {
  const req = http.get({ host: "127.0.0.1", port, path: `/api/locks/stream?encoding=${encoding}`, headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" } }, (res) => {
    if (res.statusCode !== 200) throw new Error(`stream answered ${res.statusCode}`);
    if (onBytes) res.on("data", onBytes);
    else {
      res.setEncoding("utf8");
      res.on("data", (chunk) => onChunk(chunk, now()));
    }
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
// The other streams are not parsed: each says once when its snapshot is through (the last part is the one that
// carries an id, and no frame is written to a stream before its snapshot's end), so that the bench measures after
// the snapshots a hundred streams opening at once cost the console.
const SNAPSHOT_END = /(^|\n)id: [^\n]*\nevent: snapshot\n/;
const SNAPSHOT_EVENT = Buffer.from("\nevent: snapshot\n");
for (let i = 1; i < streams; i++) {
  let tail = Buffer.alloc(0);
  let through = false;
  open(null, (chunk) => {
    if (through) return;
    const bytes = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
    // (A part's event line is looked for in the bytes; only around it is text made.)
    for (let at = bytes.indexOf(SNAPSHOT_EVENT); at >= 0; at = bytes.indexOf(SNAPSHOT_EVENT, at + 1)) {
      if (!SNAPSHOT_END.test(bytes.subarray(Math.max(0, at - 200), at + SNAPSHOT_EVENT.length).toString("latin1"))) continue;
      through = true;
      parentPort?.postMessage({ kind: "snapshot-through" });
      return;
    }
    tail = Buffer.from(bytes.subarray(Math.max(0, bytes.length - 256)));
  });
}
