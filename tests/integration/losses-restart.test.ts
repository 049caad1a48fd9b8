import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockLoss } from "@/lib/locks/types";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const VIEWER_TOKEN = "it-losses-viewer-token-0123456789";

/**
 * The losses list is what an on-call engineer opens after `LockscopeLocksLostInRestart` paged: a console that
 * restarted meanwhile (a deploy, or a crash beside the node it watched) still lists the last day's losses.
 */
describe("the losses list across a console restart", () => {
  let cluster: TestCluster;
  const consoles: LauncherProcess[] = [];

  beforeAll(async () => {
    cluster = await startCluster(3);
  }, 60_000);
  afterAll(async () => {
    for (const c of consoles) await c.stop("SIGKILL");
    await cluster?.close();
  });

  const start = async (dataDir?: string) => {
    const started = await startLauncher({
      REDIS_URLS: cluster.urls.join(","),
      LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      LOCKSCOPE_OPERATOR_TOKEN: "it-losses-operator-token-0123456789",
      ...(dataDir ? { LOCKSCOPE_DATA_DIR: dataDir } : {}),
    });
    consoles.push(started);
    return started;
  };
  const losses = async (console: LauncherProcess): Promise<LockLoss[]> => {
    const res = await fetch(`${console.baseUrl}/api/losses`, { headers: { authorization: `Bearer ${VIEWER_TOKEN}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { losses: LockLoss[] }).losses;
  };

  it("lists the locks a node lost before the console restarted, as it listed them, and only once", async () => {
    const first = await start();
    const [n0, n1, n2] = cluster.clients();
    await n1!.set("lock:kept/single", "holder-single", "PX", 600_000);
    await Promise.all([n0!, n1!, n2!].map((c) => c.set("lock:kept/quorum", "holder-quorum", "PX", 600_000)));
    await until("the console lists both locks", async () => {
      const res = await fetch(`${first.baseUrl}/api/locks?q=lock:kept`, { headers: { authorization: `Bearer ${VIEWER_TOKEN}` } });
      return ((await res.json()) as { locks?: unknown[] }).locks?.length === 2;
    });
    await cluster.kill(1);
    await cluster.restart(1);
    const before = await until("node 1's losses listed", async () => {
      const listed = await losses(first);
      return listed.length === 2 ? listed : null;
    });
    expect(before.map((l) => [l.resource, l.wentOn]).sort()).toEqual([
      ["lock:kept/quorum", true],
      ["lock:kept/single", false],
    ]);

    expect(await first.stop("SIGTERM")).toBe(0);
    // Kept in its data folder, readable by its owner only (the values locks were held with are in it).
    const file = path.join(first.dataDir, "losses.jsonl");
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(2);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const second = await start(first.dataDir);
    expect(await losses(second)).toEqual(before);
    // A further restart neither doubles nor drops them.
    expect(await second.stop("SIGTERM")).toBe(0);
    const third = await start(first.dataDir);
    expect(await losses(third)).toEqual(before);
  }, 120_000);
});
