import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { E2E_OPERATOR_TOKEN, E2E_VIEWER_TOKEN, expect, test } from "./fixtures";
import { unique } from "./scene";

/**
 * A second console, started by this spec on loopback with its own redis-server processes, watching two
 * deployments (a Redlock set of three nodes and a standalone instance) from a deployments file. The e2e web
 * server's console watches one deployment and shows no Deployment column (the other specs).
 */
test.describe("a console watching two deployments", () => {
  let orders: TestCluster;
  let cache: TestCluster;
  let console2: LauncherProcess;
  let ordersNodes: Redis[];
  let cacheNode: Redis;

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    orders = await startCluster(3);
    cache = await startCluster(1);
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-e2e-deployments-")), "deployments.json");
    writeFileSync(
      file,
      JSON.stringify({
        deployments: [
          { name: "orders", kind: "redlock", urls: orders.urls },
          { name: "cache", kind: "standalone", url: cache.urls[0] },
        ],
      }),
    );
    console2 = await startLauncher({ LOCKSCOPE_DEPLOYMENTS_FILE: file, LOCKSCOPE_OPERATOR_TOKEN: E2E_OPERATOR_TOKEN, LOCKSCOPE_VIEWER_TOKEN: E2E_VIEWER_TOKEN });
    ordersNodes = orders.clients();
    cacheNode = cache.client(0);
  });

  test.afterAll(async () => {
    await console2?.stop();
    await orders?.close();
    await cache?.close();
  });

  test("shows a Deployment column and filter, and the lock page names its deployment", async ({ page }) => {
    const origin = console2.baseUrl;
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_OPERATOR_TOKEN, name: "e2e-operator" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const resource = unique("shared");
    for (const n of ordersNodes) await n.set(resource, "orders-holder", "PX", 120_000);
    await cacheNode.set(resource, "cache-holder", "PX", 120_000);

    await page.goto(`${origin}/`);
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table.getByRole("columnheader", { name: "Deployment" })).toBeVisible();
    const onOrders = table.getByRole("row", { name: `${resource} on orders` });
    const onCache = table.getByRole("row", { name: `${resource} on cache` });
    await expect(onOrders).toBeVisible();
    await expect(onCache).toBeVisible();
    await expect(onCache.getByRole("cell", { name: "cache", exact: true })).toBeVisible();

    // The deployment filter keeps one deployment's rows.
    await page.getByRole("combobox", { name: "Deployment" }).selectOption("cache");
    await expect(onOrders).toHaveCount(0);
    await expect(onCache).toBeVisible();

    // The lock page's URL names the deployment, and the page shows that deployment's lock.
    await onCache.getByRole("link", { name: resource }).click();
    await expect(page).toHaveURL(new RegExp(`/locks/${encodeURIComponent(resource).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\?deployment=cache$`));
    await expect(page.getByRole("heading", { name: resource })).toBeVisible();
    const deployment = page.locator("dt", { hasText: /^Deployment$/ }).locator("xpath=following-sibling::dd[1]");
    await expect(deployment).toHaveText("cache");
    await expect(page.getByText("cache-holder").first()).toBeVisible();

    // Without the deployment, the page asks which, with a link to each.
    await page.goto(`${origin}/locks/${encodeURIComponent(resource)}`);
    await expect(page.getByRole("alert")).toContainText("is a lock on 2 deployments");
    const choices = page.getByRole("list", { name: "Deployments holding this lock" });
    await expect(choices.getByRole("link")).toHaveText([`${resource} on orders`, `${resource} on cache`]);
  });
});
