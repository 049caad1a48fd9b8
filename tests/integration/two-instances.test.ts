import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redlock, type RedlockLock as Lock } from "@lockscope/redlock";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { until as waitFor } from "../support/wait";

const OPERATOR_TOKEN = "it-two-instances-operator-token-0123";
const RESOURCE = "lock:orders/two-instances";

interface LockRow {
  resource: string;
  state: string;
  token: string | null;
  holder: { label?: string } | null;
  quorumHeld: number;
}
interface AuditEntry {
  id: string;
  actor: string;
  resource: string;
  reason: string;
  outcome: string;
}

async function get<T>(console_: LauncherProcess, pathAndQuery: string): Promise<T> {
  const res = await fetch(`${console_.baseUrl}${pathAndQuery}`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

/** Reads until `ok` holds (a condition, never a fixed sleep); throws with the last value after 30 s. */
async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  let last: T | undefined;
  try {
    return await waitFor(what, async () => {
      last = await read();
      return ok(last) ? { value: last } : null;
    }, 30_000).then((r) => r.value);
  } catch {
    throw new Error(`never saw ${what}: ${JSON.stringify(last).slice(0, 1000)}`);
  }
}

/** Two console processes over the same lock nodes, as behind a load balancer. */
describe("two console instances on the same lock nodes", () => {
  let cluster: TestCluster;
  let a: LauncherProcess;
  let b: LauncherProcess;
  let redlock: Redlock;
  let lock: Lock;

  const lockOn = (console_: LauncherProcess) => async () =>
    (await get<{ locks: LockRow[] }>(console_, "/api/locks")).locks.find((l) => l.resource === RESOURCE) ?? null;

  beforeAll(async () => {
    cluster = await startCluster(3);
    const env = { REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN };
    // One after the other: the first start builds the bundle if the sources changed, the second reuses it.
    a = await startLauncher(env);
    b = await startLauncher(env);
    // (A node timeout of 1 s, not the default 200 ms: a pause of this test process must not count answers as missing.)
    redlock = new Redlock(cluster.clients(), { label: "checkout worker", retryCount: 0, nodeTimeoutMs: 1_000 });
  }, 300_000);

  afterAll(async () => {
    await redlock?.quit();
    await Promise.all([a?.stop("SIGTERM"), b?.stop("SIGTERM")]);
    await cluster?.close();
  });

  it("show the same lock, held by the same holder with the same token", async () => {
    lock = await redlock.acquire([RESOURCE], 60_000);
    const [onA, onB] = await Promise.all(
      [a, b].map((c) => until(lockOn(c), (l) => l?.state === "held" && l.quorumHeld === 3, `the lock held on ${c.baseUrl}`)),
    );
    expect(onA?.token).toBe(lock.value);
    expect(onB?.token).toBe(lock.value);
    expect(onA?.holder?.label).toBe("checkout worker");
    expect(onB?.holder).toEqual(onA?.holder);
  });

  it("both see a force release made through one of them, and show the same audit log", async () => {
    const res = await fetch(`${a.baseUrl}/api/locks/${encodeURIComponent(RESOURCE)}/release`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/json", "x-lockscope-actor": "alice" },
      body: JSON.stringify({ reason: "holder stuck in a GC pause", token: lock.value }),
    });
    expect(res.status).toBe(200);
    const released = (await res.json()) as { released: boolean; auditId: string };
    expect(released.released).toBe(true);

    // B learns of it from the nodes alone (the revocation message and the keys going away).
    await until(lockOn(b), (l) => l === null || l.state === "force-released", "the lock gone on B");
    await until(lockOn(a), (l) => l === null || l.state === "force-released", "the lock gone on A");

    const auditOf = (c: LauncherProcess) => get<{ entries: AuditEntry[] }>(c, `/api/audit?resource=${encodeURIComponent(RESOURCE)}`);
    const [auditA, auditB] = await Promise.all([auditOf(a), auditOf(b)]);
    expect(auditA.entries).toHaveLength(1);
    expect(auditB.entries).toEqual(auditA.entries);
    expect(auditA.entries[0]).toMatchObject({ id: released.auditId, actor: "alice", resource: RESOURCE, reason: "holder stuck in a GC pause", outcome: "released" });
  });
});
