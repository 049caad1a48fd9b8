/**
 * A script that runs one `using()` routine and then closes everything it opened, as a short-lived job
 * does: the process must end by itself. The routine ends while an automatic extension is out on the
 * nodes. Arguments: the nodes' ports, as JSON.
 */
import Redis from "ioredis";
import { EXTEND_LUA } from "../../extend.lua.ts";
import { defineScript, Redlock, type RedlockClient } from "../../index.ts";

const ports = JSON.parse(process.argv[2]!) as number[];
const clients = ports.map((port) => new Redis(port, "127.0.0.1"));
const extendSha = defineScript(EXTEND_LUA).sha;
let extending!: () => void;
const extensionSent = new Promise<void>((resolve) => (extending = resolve));
// The job's clients, which tell it when the engine sends an extension.
const watched = clients.map((client): RedlockClient => ({
  evalsha: (sha, ...rest) => {
    if (sha === extendSha) extending();
    return client.evalsha(sha, ...rest);
  },
  eval: (...args) => client.eval(...args),
  set: (...args) => client.set(...args),
  duplicate: () => client.duplicate(),
}));
// A TTL of two weeks, extended 200 ms after the lock is taken.
const ttlMs = 14 * 24 * 3600 * 1000;
const redlock = new Redlock(watched, { automaticExtensionThresholdMs: ttlMs - (Math.round(0.01 * ttlMs) + 2) - 200 });
const result = await redlock.using(["lock:job"], ttlMs, async () => {
  await extensionSent;
  return "done";
});
await redlock.quit();
await Promise.all(clients.map((client) => client.quit()));
process.stdout.write(result);
