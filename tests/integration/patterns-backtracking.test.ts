import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

const OPERATOR_TOKEN = "it-operator-token-0123456789abcdef";

/**
 * A lock pattern is an operator's input (and shared with every console over the same nodes, and kept across
 * restarts): however it is written, deciding whether a key is a lock must stay cheap. A glob with many `*`
 * (`*a*a*…*b`, 200 characters are allowed) tested against a key it does not match must not tie the console up:
 * a backtracking matcher takes longer than the age of the universe on an 80-character key, and the console,
 * whose one thread is then busy, answers nothing at all.
 */
describe("a lock pattern with many wildcards", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    cluster = await startCluster(3);
    launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN });
  }, 120_000);
  afterAll(async () => {
    await launcher?.stop("SIGKILL");
    await cluster?.close();
  });

  it("is taken, finds its locks, and the console goes on answering with such keys on the nodes", async () => {
    const glob = `${"*a".repeat(12)}*b`;
    const nearMiss = "a".repeat(80);
    const lock = `${"a".repeat(12)}b`;
    for (const node of cluster.clients()) await node.set(nearMiss, "not a lock");
    const put = await fetch(`${launcher.baseUrl}/api/patterns`, {
      method: "PUT",
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ patterns: [{ glob: "lock:*" }, { glob }], reason: "locks named after their a's" }),
      signal: AbortSignal.timeout(60_000),
    });
    expect(put.status, await put.clone().text()).toBe(200);
    for (const node of cluster.clients()) await node.set(lock, "holder-1", "PX", 60_000);

    // (Bounded only so that a console that never answers fails the test rather than hanging it.)
    const health = await fetch(`${launcher.baseUrl}/api/health`, { signal: AbortSignal.timeout(60_000) });
    expect(health.status).toBe(200);
    // The lock shows once the watchers have read its notifications on the nodes (404 until then, not a hang).
    const lockDetail = () =>
      fetch(`${launcher.baseUrl}/api/locks/${encodeURIComponent(lock)}`, {
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
        signal: AbortSignal.timeout(60_000),
      });
    let detail = await lockDetail();
    for (const until = Date.now() + 20_000; detail.status === 404 && Date.now() < until; detail = await lockDetail()) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(detail.status).toBe(200);
    expect(await detail.json()).toMatchObject({ resource: lock, holders: [{ id: "holder-1" }] });
    const nearMissDetail = await fetch(`${launcher.baseUrl}/api/locks/${encodeURIComponent(nearMiss)}`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      signal: AbortSignal.timeout(60_000),
    });
    expect(nearMissDetail.status).toBe(404);
  }, 240_000);
});
