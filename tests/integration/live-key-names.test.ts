import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/app/api/health/route";
import type * as LocksModule from "@/app/api/locks/route";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

/**
 * Redis key names are bytes; the console reads them as UTF-8 text. A lock key whose name is not UTF-8 cannot be
 * shown or released: it is counted per node in the health and on the Nodes panel, never left out unsaid. A name
 * that is text with U+FFFD in it is an ordinary lock.
 */
describe("lock keys whose names are not UTF-8 text", () => {
  let cluster: TestCluster;
  let health: typeof HealthModule;
  let locks: typeof LocksModule;
  const notText = (suffix: string) => Buffer.concat([Buffer.from("lock:names/"), Buffer.from([0xff, 0xfe]), Buffer.from(suffix)]);

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    // There before the console starts: found by its SCAN.
    await cluster.client(0).set(notText("-scanned"), "holder-a", "PX", 120_000);
    health = await import("@/app/api/health/route");
    locks = await import("@/app/api/locks/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    startLive();
    expect(await waitUntilReconciled(20_000)).toBe(true);
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const counted = async () => {
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ keyNamesNotText?: number }> };
    return body.nodes[0]?.keyNamesNotText;
  };
  const listed = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string }> }).locks.map((l) => l.resource);

  it("counts one found at start and one taken later, and lists a name that is text with U+FFFD in it", async () => {
    await until("the key found at start counted", async () => ((await counted()) === 1 ? true : null));
    // Taken while the console watches: seen through its notification.
    await cluster.client(0).set(notText("-notified"), "holder-b", "PX", 120_000);
    await until("the key taken later counted", async () => ((await counted()) === 2 ? true : null));
    const real = "lock:names/\uFFFD-real";
    await cluster.client(0).set(real, "holder-c", "PX", 120_000);
    await until("the text name listed", async () => ((await listed()).includes(real) ? true : null));
    expect(await counted()).toBe(2);
    expect((await listed()).filter((r) => r.startsWith("lock:names/"))).toEqual([real]);
  });
});
