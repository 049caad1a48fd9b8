import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { README_CONSOLE_ACL } from "../support/acl";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";

const PASSWORD = "console-password-frozen-0123456789";
/** The keyspace channels of the globs the tests add (a pattern subscription needs its own rule). */
const EXTRA_CHANNELS = "&__keyspace@0__:lock:a/* &__keyspace@0__:lock:b/* &__keyspace@0__:lock:c/*";

/**
 * A change of the lock patterns is first tried on every lock node (may the console's Redis user watch the new
 * globs?). One node frozen (SIGSTOP: its port still takes connections, nothing answers) must not hold the
 * operator's request up for as long as it stays frozen, nor seconds per new glob: the answer comes, judged by the
 * nodes that answered, and says which node could not be checked.
 */
describe("the ACL check of a pattern change with a frozen lock node", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    for (const c of cluster.clients()) await c.call("ACL", "SETUSER", "lockscope", ...`>${PASSWORD} ${README_CONSOLE_ACL} ${EXTRA_CHANNELS}`.split(" "));
    process.env.REDIS_URLS = cluster.ports.map((port) => `redis://lockscope:${PASSWORD}@127.0.0.1:${port}`).join(",");
    await startLiveReconciled();
    (await import("@/server/patterns")).setPatternsAuditor({ recordIntent: () => Promise.resolve(), recordOutcome: () => Promise.resolve() });
  });

  afterAll(async () => {
    if (cluster.paused(2)) cluster.resume(2);
    await tearDownConsole(cluster);
  });

  it("refuses a glob the answering nodes refuse, and names the frozen node as not checked", async () => {
    const patterns = await import("@/app/api/patterns/route");
    const before = (await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body as { patterns: Array<{ glob: string }> };
    cluster.pause(2);
    // Four new globs: one the user may not watch anywhere, three it may.
    const wanted = { patterns: [...before.patterns, { glob: "orders:*" }, { glob: "lock:a/*" }, { glob: "lock:b/*" }, { glob: "lock:c/*" }], reason: "watch more locks" };
    const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: wanted });
    const [p0, p1, p2] = cluster.ports;
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    const error = (res.body as { error: { message: string; details: unknown } }).error;
    expect(error.message).toBe(
      `The console's Redis user may not watch \`orders:*\` (redis://lockscope:****@127.0.0.1:${p0}, redis://lockscope:****@127.0.0.1:${p1} refuse it; the user needs \`&__keyspace@0__:orders:*\` and \`~orders:*\`): add those rules to the user's ACL on every lock node, then make this change again. Nothing changed. Not checked (no answer within 3 s): redis://lockscope:****@127.0.0.1:${p2}.`,
    );
    expect(error.details).toEqual({
      refused: [{ glob: "orders:*", nodes: [`redis://lockscope:****@127.0.0.1:${p0}`, `redis://lockscope:****@127.0.0.1:${p1}`], rules: ["&__keyspace@0__:orders:*", "~orders:*"] }],
      notChecked: [`redis://lockscope:****@127.0.0.1:${p2}`],
    });
    expect((await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body).toMatchObject({ patterns: before.patterns });
  });

  it("applies a change the answering nodes allow, and says which node it could not check", async () => {
    const patterns = await import("@/app/api/patterns/route");
    const before = (await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body as { patterns: Array<{ glob: string }> };
    const wanted = { patterns: [...before.patterns, { glob: "lock:a/*" }, { glob: "lock:b/*" }, { glob: "lock:c/*" }], reason: "watch more locks" };
    const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: wanted });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body as { notChecked?: unknown }).notChecked).toEqual([`redis://lockscope:****@127.0.0.1:${cluster.ports[2]}`]);
    expect((res.body as { patterns: Array<{ glob: string }> }).patterns.map((p) => p.glob)).toEqual(wanted.patterns.map((p) => p.glob));
    cluster.resume(2);
  });
});
