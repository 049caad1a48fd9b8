import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { startRedisNodes, type RedisNode } from "@/lib/redis-node";
import { E2E_OPERATOR_TOKEN, E2E_VIEWER_TOKEN, expect, test } from "./fixtures";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startSentinel } from "../support/sentinel";
import { deleteMatching, FLEET, holdFleet, scrollingTables, settled, unique } from "./scene";

/**
 * A second console, started by this spec on loopback with its own redis-server processes (free ports, a
 * temporary folder), watching three deployments from a deployments file: a Redlock set of three nodes, a
 * standalone instance with a replica, and a Sentinel-managed primary without one. The e2e web server's
 * console watches one deployment and shows no Deployment column.
 */
test.describe("a console watching three deployments", () => {
  let dir: string;
  let nodes: RedisNode[] = [];
  let replica: RedisNode | null = null;
  let sentinel: ChildProcess | null = null;
  let clients: Redis[] = [];
  let launcher: LauncherProcess | null = null;
  let origin = "";

  test.beforeAll(async () => {
    test.setTimeout(180_000);
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-e2e-deployments-"));
    nodes = await startRedisNodes(5, { dir });
    // The Sentinel deployment's primary (nodes[4]) has no replica.
    const watching = await startSentinel(dir, "locks", nodes[4]!.port);
    sentinel = watching.child;
    // The standalone deployment's instance has a replica (the console watches the primary only).
    replica = (await startRedisNodes(1, { dir, extraArgs: ["--replicaof", "127.0.0.1", String(nodes[3]!.port)] }))[0] ?? null;
    const urls = nodes.map((n) => n.url);
    const file = path.join(dir, "deployments.json");
    writeFileSync(
      file,
      JSON.stringify({
        deployments: [
          { name: "orders", kind: "redlock", urls: urls.slice(0, 3) },
          { name: "cache", kind: "standalone", url: urls[3] },
          { name: "failover", kind: "sentinel", sentinels: [`127.0.0.1:${watching.port}`], master: "locks" },
        ],
      }),
    );
    // (On another free port if the one it was given is taken first.)
    launcher = await startLauncher(
      {
        LOCKSCOPE_DATA_DIR: path.join(dir, "data"),
        LOCKSCOPE_DEPLOYMENTS_FILE: file,
        LOCKSCOPE_OPERATOR_TOKEN: E2E_OPERATOR_TOKEN,
        LOCKSCOPE_VIEWER_TOKEN: E2E_VIEWER_TOKEN,
      },
      { until: "ready" },
    );
    origin = launcher.baseUrl;
    clients = nodes.map((n) => {
      const c = new Redis(n.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
      c.on("error", () => undefined);
      return c;
    });
  });

  test.afterAll(async () => {
    for (const c of clients) c.disconnect();
    await launcher?.stop();
    sentinel?.kill("SIGKILL");
    await Promise.all([...nodes, ...(replica ? [replica] : [])].map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  test("shows a Deployment column and filter, and the lock page names its deployment", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_OPERATOR_TOKEN, name: "e2e-operator" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const resource = unique("shared");
    for (const n of clients.slice(0, 3)) await n.set(resource, "orders-holder", "PX", 120_000);
    await clients[3]!.set(resource, "cache-holder", "PX", 120_000);

    await page.goto(`${origin}/`);
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table.getByRole("columnheader", { name: "Deployment" })).toBeVisible();
    const onOrders = table.getByRole("row", { name: `${resource} on orders` });
    const onCache = table.getByRole("row", { name: `${resource} on cache` });
    await expect(onOrders).toBeVisible();
    await expect(onCache).toBeVisible();
    await expect(onCache.getByRole("cell", { name: "cache", exact: true })).toBeVisible();

    // The nodes panel names each node's deployment (node ids repeat across them).
    const nodesTable = page.getByRole("table", { name: "Lock nodes" });
    await expect(nodesTable.getByRole("row", { name: "orders node-0" })).toBeVisible();
    await expect(nodesTable.getByRole("row", { name: "cache node-0" })).toBeVisible();

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
    await expect(page.getByRole("alert").filter({ hasText: "is a lock on 2 deployments (orders, cache)" })).toBeVisible();
    const choices = page.getByRole("list", { name: "Deployments holding this lock" });
    await expect(choices.getByRole("link")).toHaveText([`${resource} on orders`, `${resource} on cache`]);
  });

  test("the locks table filtered to a deployment that holds no lock says so, not that no lock is under the patterns", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const resource = unique("elsewhere");
    for (const n of clients.slice(0, 3)) await n.set(resource, "orders-holder", "PX", 120_000);
    await page.goto(`${origin}/`);
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table.getByRole("row", { name: `${resource} on orders` })).toBeVisible();
    // The Sentinel deployment's primary holds no lock in this spec.
    await page.getByRole("combobox", { name: "Deployment" }).selectOption("failover");
    await expect(table).toContainText("No locks on failover right now.");
    await expect(table).not.toContainText("No locks under the lock patterns");
    for (const n of clients.slice(0, 3)) await n.del(resource);
  });

  test("a large fleet's groups filter by deployment, and a group opened so shows that deployment's locks only", async ({ page }) => {
    test.setTimeout(120_000);
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const prefix = `lock:fleet${randomBytes(2).toString("hex")}`;
    try {
      // The fleet (above 5,000 locks: the grouped view) on `cache`; 30 locks of its orders group, same names, on `orders`.
      await holdFleet([clients[3]!], prefix);
      for (const c of clients.slice(0, 3)) {
        const pipeline = c.pipeline();
        for (let i = 0; i < 30; i++) pipeline.set(`${prefix}-orders/job-${String(i).padStart(4, "0")}`, `orders-holder-${i}`, "PX", 600_000);
        await pipeline.exec();
      }

      await page.goto(`${origin}/`);
      const groups = page.getByRole("table", { name: "Lock groups" });
      const orders = groups.getByRole("row", { name: `${prefix}-orders`, exact: true });
      await expect(orders.getByRole("cell").nth(0)).toHaveText(String(FLEET.orders + 30), { timeout: 30_000 });
      await expect(groups.getByRole("row", { name: `${prefix}-bulk`, exact: true })).toBeVisible();

      await page.getByRole("combobox", { name: "Deployment" }).selectOption("orders");
      await expect(orders.getByRole("cell").nth(0)).toHaveText("30");
      await expect(groups.getByRole("row", { name: `${prefix}-bulk`, exact: true })).toHaveCount(0);

      await orders.getByRole("link", { name: `${prefix}-orders` }).click();
      await expect(page).toHaveURL(/[?&]deployment=orders(&|$)/);
      await expect(page.getByText("30 locks", { exact: true })).toBeVisible();
      const table = page.getByRole("table", { name: "Locks" });
      await expect(table.getByRole("row", { name: `${prefix}-orders/job-0000 on orders`, exact: true })).toBeVisible();
      await expect(table.getByRole("row", { name: `${prefix}-orders/job-0000 on cache`, exact: true })).toHaveCount(0);

      // Back to every group: still the deployment chosen, by the page's link and by the browser's Back.
      await page.getByRole("link", { name: "← All groups" }).click();
      await expect(page.getByRole("combobox", { name: "Deployment" })).toHaveValue("orders");
      await expect(orders.getByRole("cell").nth(0)).toHaveText("30");
      await orders.getByRole("link", { name: `${prefix}-orders` }).click();
      await expect(page.getByText("30 locks", { exact: true })).toBeVisible();
      await page.goBack();
      await expect(page.getByRole("combobox", { name: "Deployment" })).toHaveValue("orders");
      await expect(orders.getByRole("cell").nth(0)).toHaveText("30");
    } finally {
      await deleteMatching(clients, `${prefix}-*`);
    }
  });

  test("a group's table is as wide in its Nodes column as the deployment shown has nodes", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const group = `lock:nodes${randomBytes(2).toString("hex")}`;
    try {
      for (const c of clients.slice(0, 3)) await c.set(`${group}/on-orders`, "orders-holder", "PX", 120_000);
      await clients[3]!.set(`${group}/on-cache`, "cache-holder", "PX", 120_000);
      const table = page.getByRole("table", { name: "Locks" });
      // The Nodes column is laid out for this many dots (the three deployments have 3, 1 and 1 nodes: 5 in all).
      const dotsLaidOut = () => table.evaluate((el) => getComputedStyle(el).getPropertyValue("--node-count").trim());

      // One deployment's locks of the group: its one node.
      await page.goto(`${origin}/?group=${encodeURIComponent(group)}&deployment=cache`);
      const onCache = table.getByRole("row", { name: `${group}/on-cache on cache`, exact: true });
      await expect(onCache.getByRole("img", { name: /^node-0: / })).toHaveCount(1);
      await expect.poll(dotsLaidOut).toBe("1");

      // Every deployment's: as many as the largest has, never their sum.
      await page.goto(`${origin}/?group=${encodeURIComponent(group)}`);
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true }).getByRole("img", { name: /^node-\d: / })).toHaveCount(3);
      await expect.poll(dotsLaidOut).toBe("3");

      // The table of every lock, filtered by one deployment: that deployment's.
      await page.goto(`${origin}/`);
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true })).toBeVisible();
      await expect.poll(dotsLaidOut).toBe("3");
      await page.getByRole("combobox", { name: "Deployment" }).selectOption("cache");
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true })).toHaveCount(0);
      await expect.poll(dotsLaidOut).toBe("1");
    } finally {
      await Promise.all([...clients.slice(0, 3).map((c) => c.del(`${group}/on-orders`)), clients[3]!.del(`${group}/on-cache`)]);
    }
  });

  test("a table shown for one deployment has no Deployment column, and its rows still open that deployment's lock", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const group = `lock:one${randomBytes(2).toString("hex")}`;
    try {
      for (const c of clients.slice(0, 3)) await c.set(`${group}/on-orders`, "orders-holder", "PX", 120_000);
      await clients[3]!.set(`${group}/on-cache`, "cache-holder", "PX", 120_000);
      const table = page.getByRole("table", { name: "Locks" });
      const column = table.getByRole("columnheader", { name: "Deployment" });

      // A group opened for one deployment: every row would say the same name, which the title says once.
      await page.goto(`${origin}/?group=${encodeURIComponent(group)}&deployment=cache`);
      const onCache = table.getByRole("row", { name: `${group}/on-cache on cache`, exact: true });
      await expect(onCache).toBeVisible();
      await expect(column).toHaveCount(0);
      await expect(onCache.getByRole("cell", { name: "cache", exact: true })).toHaveCount(0);
      await expect(onCache.getByRole("link", { name: `${group}/on-cache` })).toHaveAttribute("href", `/locks/${encodeURIComponent(`${group}/on-cache`)}?deployment=cache`);

      // The same group, every deployment's locks: the column says which is which.
      await page.goto(`${origin}/?group=${encodeURIComponent(group)}`);
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true })).toBeVisible();
      await expect(column).toBeVisible();

      // The table of every lock, filtered by one deployment: no column either, until the filter is taken off.
      await page.goto(`${origin}/`);
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true })).toBeVisible();
      await expect(column).toBeVisible();
      await page.getByRole("combobox", { name: "Deployment" }).selectOption("cache");
      await expect(table.getByRole("row", { name: `${group}/on-orders on orders`, exact: true })).toHaveCount(0);
      await expect(column).toHaveCount(0);
      await expect(onCache.getByRole("link", { name: `${group}/on-cache` })).toHaveAttribute("href", `/locks/${encodeURIComponent(`${group}/on-cache`)}?deployment=cache`);
      await page.getByRole("combobox", { name: "Deployment" }).selectOption("");
      await expect(column).toBeVisible();
    } finally {
      await Promise.all([...clients.slice(0, 3).map((c) => c.del(`${group}/on-orders`)), clients[3]!.del(`${group}/on-cache`)]);
    }
  });

  test("the audit log names each release's deployment, and filters by it", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_OPERATOR_TOKEN, name: "e2e-operator" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const resource = unique("audited");
    for (const n of clients.slice(0, 3)) await n.set(resource, "orders-holder", "PX", 120_000);
    await clients[3]!.set(resource, "cache-holder", "PX", 120_000);
    // The same lock name force-released on two deployments, by a script: two entries a reader must tell apart.
    for (const deployment of ["orders", "cache"]) {
      const released = await page.request.post(`${origin}/api/locks/${encodeURIComponent(resource)}/release?deployment=${deployment}`, {
        data: { reason: `${deployment} worker hung` },
        headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` },
      });
      expect(released.status(), await released.text()).toBe(200);
    }

    await page.goto(`${origin}/audit?resource=${encodeURIComponent(resource)}`);
    const table = page.getByRole("table", { name: "Audit entries" });
    const column = table.getByRole("columnheader", { name: "Deployment" });
    const onOrders = table.getByRole("row").filter({ hasText: "orders worker hung" });
    const onCache = table.getByRole("row").filter({ hasText: "cache worker hung" });
    await expect(column).toBeVisible();
    await expect(onOrders.getByRole("cell", { name: "orders", exact: true })).toBeVisible();
    await expect(onCache.getByRole("cell", { name: "cache", exact: true })).toBeVisible();
    // A screen reader tells the two rows' buttons apart by the deployment too.
    await expect(onCache.getByRole("button", { name: new RegExp(`^Details of the release of ${resource.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} on cache at `) })).toBeVisible();
    // The extra column still fits a laptop's screen.
    await page.setViewportSize({ width: 1280, height: 900 });
    await settled(page);
    expect(await scrollingTables(page), "tables scrolling sideways at 1280 px").toEqual([]);

    // The filter picks one deployment's entries (the address keeps it); the column, saying one name on every row, goes.
    const filter = page.getByRole("form", { name: "Filter the audit log" }).getByRole("combobox", { name: "Deployment" });
    await expect(filter.getByRole("option")).toHaveText(["All deployments", "orders", "cache", "failover"]);
    await filter.selectOption("cache");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(onOrders).toHaveCount(0);
    await expect(onCache).toBeVisible();
    await expect(column).toHaveCount(0);
    await expect(page).toHaveURL(/[?&]deployment=cache(&|$)/);
    // The export downloads what the page shows.
    await expect(page.getByRole("link", { name: "Export CSV" })).toHaveAttribute("href", /[?&]deployment=cache(&|$)/);
    await page.reload();
    await expect(filter).toHaveValue("cache");
    await expect(onCache).toBeVisible();
    await expect(onOrders).toHaveCount(0);

    // An address naming a deployment this console does not watch (one removed from its configuration, whose releases
    // the log keeps): the filter offers it as chosen, and the table lists the entries that name it, here none.
    await page.goto(`${origin}/audit?deployment=billing&resource=${encodeURIComponent(resource)}`);
    await expect(filter).toHaveValue("billing");
    await expect(filter.getByRole("option")).toHaveText(["All deployments", "orders", "cache", "failover", "billing"]);
    await expect(page.getByText("No force releases or pattern changes recorded that match these filters.")).toBeVisible();
  });

  test("the nodes panel shows each node's replicas and how far behind each is", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    await page.goto(`${origin}/`);
    const nodesTable = page.getByRole("table", { name: "Lock nodes" });
    await expect(nodesTable.getByRole("columnheader", { name: "Replication" })).toBeVisible();
    const replicas = nodesTable.getByRole("row", { name: "cache node-0" }).getByRole("list", { name: "Replicas of node-0" });
    await expect(replicas.getByRole("listitem")).toHaveText([new RegExp(`^127\\.0\\.0\\.1:${replica!.port} online, \\d+(\\.\\d)? (B|KB|MB) behind$`)]);
    // The Redlock set's nodes are independent instances, none of them replicated.
    for (const id of ["node-0", "node-1", "node-2"]) await expect(nodesTable.getByRole("row", { name: `orders ${id}` }).getByRole("cell").last()).toHaveText("no replica");
    // A Sentinel-managed primary without a replica is a warning: a failover would have nothing to promote.
    await expect(nodesTable.getByRole("row", { name: "failover node-0" }).getByRole("cell").last()).toHaveText(
      "⚠ no replica: a failover has nothing to promote, and the locks are on this primary alone",
    );

    // The replica stops: the primary no longer lists it.
    await replica!.stop();
    await expect(replicas).toHaveCount(0, { timeout: 30_000 });
    await expect(nodesTable.getByRole("row", { name: "cache node-0" }).getByRole("cell").last()).toHaveText("no replica");
  });

  test("a node demoted to a replica is shown read-only in the nodes panel, not just up", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    // An empty primary elsewhere; orders node-1 made its replica (as a manual failover demotes a node the console's URL names).
    const [primary] = await startRedisNodes(1, { dir: mkdtempSync(path.join(dir, "demoted-")) });
    try {
      await page.goto(`${origin}/`);
      const nodesTable = page.getByRole("table", { name: "Lock nodes" });
      const row = nodesTable.getByRole("row", { name: "orders node-1" });
      await expect(row.getByRole("cell").first()).toHaveText("up");
      await clients[1]!.replicaof("127.0.0.1", String(primary!.port));
      // It answers PING, so it is up; but it refuses every write, which is what the operator must read here.
      await expect(row.getByRole("cell").first()).toHaveText(`up, a read-only replica of 127.0.0.1:${primary!.port}: no lock can be taken or released there`, { timeout: 30_000 });
      await expect(row.getByRole("cell").last()).toHaveText(`⚠ a replica of 127.0.0.1:${primary!.port} now, its link to it up`);
      await expect(nodesTable.getByRole("row", { name: "orders node-0" }).getByRole("cell").first()).toHaveText("up");
      await clients[1]!.replicaof("NO", "ONE");
      await expect(row.getByRole("cell").first()).toHaveText("up", { timeout: 30_000 });
    } finally {
      await clients[1]!.replicaof("NO", "ONE");
      await primary?.stop();
    }
  });

  // Last: it stops one of the orders nodes.
  test("a node that goes down is shown down in every lock's row, held there or not", async ({ page }) => {
    const signIn = await page.request.post(`${origin}/api/session`, { data: { token: E2E_VIEWER_TOKEN, name: "e2e-viewer" }, headers: { Origin: origin } });
    expect(signIn.status(), await signIn.text()).toBe(200);
    const onAll = unique("on-three");
    const onTwo = unique("on-two");
    for (const c of clients.slice(0, 3)) await c.set(onAll, "holder-a", "PX", 120_000);
    for (const c of clients.slice(0, 2)) await c.set(onTwo, "holder-b", "PX", 120_000);

    await page.goto(`${origin}/`);
    const table = page.getByRole("table", { name: "Locks" });
    const dot = (resource: string, text: string) => table.getByRole("row", { name: `${resource} on orders` }).getByRole("img", { name: `node-2: ${text}` });
    await expect(dot(onAll, "holds this value")).toBeVisible();
    await expect(dot(onTwo, "holds nothing")).toBeVisible();

    // Node 2 goes away. The lock it held is sent again; the other is not (its quorum is unchanged), and its row
    // still shows node 2 down, not holding nothing.
    await nodes[2]!.stop();
    await expect(dot(onAll, "down")).toBeVisible();
    await expect(dot(onTwo, "down")).toBeVisible();
    await expect(table.getByRole("row", { name: `${onTwo} on orders` }).getByRole("img", { name: "node-0: holds this value" })).toBeVisible();
  });
});
