import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Locator, Page } from "@playwright/test";
import { RedisNode } from "@/lib/redis-node";
import type Redis from "ioredis";
import { expect, lockNodeClients, test } from "./fixtures";
import { busyLocks, deleteMatching, finishedLabRun, holdFleet, releasedByScript, restartNodeOne, settled, THEMES, unique, useSystemTheme } from "./scene";

/**
 * `npm run screenshots`: every page at 390 and 1440 px, light and dark, into docs/screenshot-<page>-<width>-<theme>.png.
 * Tagged @screenshots and left out of `npm test` (playwright.config.ts), as it rewrites files under docs/.
 */
const SIZES = [
  { width: 390, height: 844 },
  { width: 1440, height: 900 },
] as const;

/** Shoots the page in each theme and size, scrolled to `top` (a region's heading) or to the top of the page. */
async function shoot(page: Page, name: string, ready: () => Promise<void>, top?: Locator) {
  for (const theme of THEMES) {
    await useSystemTheme(page, theme);
    for (const size of SIZES) {
      await page.setViewportSize(size);
      await ready();
      if (top) await top.evaluate((el) => el.scrollIntoView({ block: "start" }));
      else await page.evaluate(() => window.scrollTo(0, 0));
      await settled(page);
      await page.screenshot({ path: `docs/screenshot-${name}-${size.width}-${theme}.png` });
    }
  }
}

test("@screenshots every page at 390 and 1440 px, light and dark", async ({ page, request, signIn }) => {
  test.setTimeout(300_000);
  await signIn("operator");
  const nodes: Redis[] = await lockNodeClients(request);
  const scene = await busyLocks(nodes);
  try {
    // A lab with something to read: the race's lost updates, the fenced lock's rejected stale writes.
    for (const strategy of ["none", "naive", "redlock-fenced", "atomic"]) await finishedLabRun(request, strategy);
    const released = unique("payments/settlement");
    await releasedByScript(request, nodes, released, "alice", "batch hung on a dead database connection after the failover");

    // The header's counts come with the live stream's first figures (a dash until then), the rates with nothing before.
    const ratesTile = page.getByLabel("Live counts").locator("div").filter({ has: page.getByText("acquisitions/s", { exact: true }) }).getByRole("definition");
    const counted = () => expect(ratesTile).toHaveText(/^\d/);
    await page.goto("/");
    const hot = page.getByRole("table", { name: "Locks" }).getByRole("row", { name: scene.hot, exact: true });
    await expect(hot).toContainText(/\d+\/min/, { timeout: 30_000 });
    // The Nodes panel shows each node's uptime and persistence once the console has read them (every 30 s).
    await expect(page.getByRole("table", { name: "Lock nodes" })).not.toContainText("unknown", { timeout: 45_000 });
    await shoot(page, "locks", async () => {
      await expect(hot).toBeVisible();
      await counted();
    });

    // The Nodes panel, with a replica of the first node beside it (its replication column lists it).
    const replica = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-shot-replica-")), extraArgs: ["--replicaof", "127.0.0.1", String(nodes[0]!.options.port)] });
    try {
      const replicas = page.getByRole("list", { name: "Replicas of node-0" });
      await shoot(page, "nodes", () => expect(replicas).toContainText("online", { timeout: 20_000 }), page.getByRole("heading", { name: "Nodes", exact: true }));
    } finally {
      await replica.stop();
    }

    await page.goto(`/locks/${encodeURIComponent(scene.hot)}`);
    await shoot(page, "lock", () => expect(page.getByRole("img", { name: /Failed acquisition attempts/ }).locator("canvas")).toBeVisible());

    // A large fleet: one row per group.
    const fleet = `lock:fleet${randomBytes(2).toString("hex")}`;
    await holdFleet(nodes, fleet);
    await page.goto("/");
    const orders = page.getByRole("table", { name: "Lock groups" }).getByRole("row", { name: `${fleet}-orders`, exact: true });
    await shoot(page, "groups", async () => {
      await expect(orders).toBeVisible({ timeout: 20_000 });
      await counted();
    });
    await deleteMatching(nodes, `${fleet}-*`);

    await page.goto("/audit");
    await shoot(page, "audit", () => expect(page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: released })).toBeVisible());

    await page.goto("/demo");
    const results = page.getByRole("table", { name: "Lab results" });
    await results.locator("tbody tr").filter({ hasText: "none" }).first().getByRole("button").click();
    await expect(page.getByRole("region", { name: "Live" })).toContainText("What the numbers say");
    await shoot(page, "demo", () => expect(page.getByRole("figure", { name: "Units sold per second" }).locator("canvas")).toBeVisible(), page.getByRole("region", { name: "Live" }));

    // Node 1 restarts empty: a single-instance lock ends lost, and the Redlocks it held go on with the other two.
    const payout = "lock:payouts/batch-2024-11-30";
    await nodes[1]!.set(payout, "payout-runner-7f2c91", "PX", 900_000);
    await restartNodeOne(request);
    await page.goto("/");
    const losses = page.getByRole("table", { name: "Lost and gone" });
    await expect(losses).toContainText(payout, { timeout: 30_000 });
    await shoot(page, "losses", async () => {
      await expect(losses).toBeVisible();
      await counted();
    });

    await page.request.delete("/api/session", { headers: { Origin: new URL(page.url()).origin } });
    await page.goto("/login");
    await shoot(page, "login", () => expect(page.getByRole("button", { name: "Sign in" })).toBeVisible());
  } finally {
    await scene.stop();
    for (const n of nodes) n.disconnect();
  }
});
