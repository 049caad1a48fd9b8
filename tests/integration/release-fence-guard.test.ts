import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { fencedWrite } from "@lockscope/redlock";
import type { TestCluster } from "../support/redis";
import { call, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";

/**
 * The engine's fenced writes keep the highest fence that wrote to a data key in `fence-seen:<key>`. A broad lock
 * pattern (here `*orders*`, for locks named after orders) also matches that key: it must never be shown or
 * released as a lock, or a force release would delete it and let an evicted holder's late write land.
 */
describe("the fenced-write guard key under a broad lock pattern", () => {
  let cluster: TestCluster;
  let release: typeof ReleaseModule;
  let nodes: Redis[];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*,*orders*" } });
    nodes = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("is neither shown nor released, and the evicted holder's late write stays refused", async () => {
    const data = "orders:42:total";
    const guard = `fence-seen:${data}`;
    // The next holder (fence 8) wrote; the evicted one (fence 7) has a write still in flight.
    expect((await fencedWrite(nodes[0]!, data, "8", { type: "set", value: "from-next" })).applied).toBe(true);
    expect(await nodes[0]!.get(guard)).toBe("8");
    await startLiveReconciled();

    expect(await lockDetail(guard)).toBeNull();
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(guard)}/release`, { body: { reason: "looks stuck" }, params: { resource: guard } });
    expect(res.status, JSON.stringify(res.body)).toBe(404);
    expect((res.body as { error: { message: string } }).error.message).toMatch(/is a key kept beside a lock .*not a lock; nothing was touched/);

    expect(await nodes[0]!.get(guard)).toBe("8");
    const late = await fencedWrite(nodes[0]!, data, "7", { type: "set", value: "from-evicted" });
    expect(late).toMatchObject({ applied: false, reason: "stale-fence" });
    expect(await nodes[0]!.get(data)).toBe("from-next");
  });
});
