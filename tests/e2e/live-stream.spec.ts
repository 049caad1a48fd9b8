import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { startRedisNodes, type RedisNode } from "@/lib/redis-node";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { E2E_OPERATOR_TOKEN, expect, test } from "./fixtures";

/**
 * The tab's live stream against a second console, started by this spec on loopback with its own redis-server
 * (a free port, a temporary folder), where reading is open (no viewer token), so that the test can end the
 * console's session or stop the console itself without touching the e2e web server's.
 */
test.describe("the live stream of a console where reading is open", () => {
  let dir: string;
  let nodes: RedisNode[] = [];
  let launcher: LauncherProcess | null = null;
  let origin = "";

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-e2e-live-stream-"));
    nodes = await startRedisNodes(1, { dir });
    // (On another free port if the one it was given is taken first.)
    launcher = await startLauncher(
      { LOCKSCOPE_DATA_DIR: path.join(dir, "data"), REDIS_URLS: nodes.map((n) => n.url).join(","), LOCKSCOPE_OPERATOR_TOKEN: E2E_OPERATOR_TOKEN, LOCKSCOPE_VIEWER_TOKEN: undefined },
      { until: "ready" },
    );
    origin = launcher.baseUrl;
  });

  test.afterAll(async () => {
    await launcher?.stop();
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  test("an operator's session that ends while a lock's page is open: the header offers Sign in and Force release goes", async ({ page }) => {
    const client = new Redis(Number(new URL(nodes[0]!.url).port), "127.0.0.1", { maxRetriesPerRequest: 1 });
    client.on("error", () => undefined);
    try {
      await client.set("lock:open-reading", "holder-token", "PX", 120_000);
      const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_OPERATOR_TOKEN, name: "e2e-operator" }, headers: { Origin: origin } });
      expect(signIn.status()).toBe(200);
      // The page's stream carries every lock of this small fleet once the page knows its size: the session is to end
      // while that stream is open (one opened after the sign-out is anyone's, and has no session to end).
      const everyLock = page.waitForResponse((res) => new URL(res.url()).pathname === "/api/locks/stream" && new URL(res.url()).search === "?encoding=compact");
      await page.goto(`${origin}/locks/${encodeURIComponent("lock:open-reading")}`);
      await everyLock;
      const signedInAs = page.getByRole("banner").getByLabel("Signed in as");
      await expect(signedInAs).toHaveText("e2e-operator (operator)");
      await expect(page.getByRole("button", { name: "Force release" })).toBeVisible();
      // Signed out in another tab (or the session expired): the page can still read, as anyone can on this console.
      const ended = await page.request.delete(`${origin}/api/session`, { headers: { Origin: origin } });
      expect(ended.status()).toBe(204);
      await expect(page.getByRole("banner").getByRole("link", { name: "Sign in" })).toBeVisible({ timeout: 30_000 });
      await expect(signedInAs).toHaveCount(0);
      await expect(page.getByRole("button", { name: "Force release" })).toHaveCount(0);
      // The lock's page goes on showing the lock.
      await expect(page.getByRole("heading", { name: "lock:open-reading" })).toBeVisible();
    } finally {
      client.disconnect();
    }
  });

  test("a console that freezes with the stream open is shown reconnecting, not live, and live again once it answers", async ({ page }) => {
    test.setTimeout(120_000);
    const everyLock = page.waitForResponse((res) => new URL(res.url()).pathname === "/api/locks/stream" && new URL(res.url()).search === "?encoding=compact");
    await page.goto(origin);
    await everyLock;
    const connection = page.getByRole("status", { name: "Live connection" });
    await expect(connection).toHaveText("live");
    // Frozen (a stalled process, a network path that drops everything without closing the connection): the stream
    // stays open, and nothing comes.
    const tile = (name: string) => page.getByLabel("Live counts").locator("div").filter({ has: page.getByText(name, { exact: true }) }).getByRole("definition");
    await expect(tile("nodes up")).toHaveText("1/1");
    await expect(tile("acquisitions/s")).toHaveText(/^\d/);
    launcher?.child.kill("SIGSTOP");
    try {
      await expect(connection).toHaveText("reconnecting…", { timeout: 60_000 });
      // What the console said last is not what it says now: its rates and its count of nodes up are not known.
      for (const name of ["acquisitions/s", "contention/s", "expirations/s", "nodes up"]) await expect(tile(name), name).toHaveText("–");
    } finally {
      launcher?.child.kill("SIGCONT");
    }
    await expect(connection).toHaveText("live", { timeout: 30_000 });
    await expect(tile("nodes up")).toHaveText("1/1");
    await expect(tile("acquisitions/s")).toHaveText(/^\d/);
  });

  // (Last: it stops this spec's console.)
  test("a console that stops answering is said unreachable in the header, not shown with its nodes up as last told", async ({ page }) => {
    await page.goto(`${origin}/audit`);
    const nodeStatus = page.getByRole("banner").getByRole("status", { name: "Lock nodes" });
    await expect(nodeStatus).toContainText("1/1 up");
    launcher?.child.kill("SIGKILL");
    await expect(nodeStatus).toContainText("Console unreachable", { timeout: 30_000 });
    await expect(nodeStatus).not.toContainText("1/1 up");
  });
});
