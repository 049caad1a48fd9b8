import { randomBytes } from "node:crypto";
import type { Locator, Page } from "@playwright/test";
import type Redis from "ioredis";
import { E2E_OPERATOR_TOKEN, expect, lockNodeClients, test } from "./fixtures";
import { accessibilityProblems, busyLocks, deleteMatching, holdLock, finishedLabRun, layoutProblems, midWordBreaks, releasedByScript, restartNodeOne, scrollingTables, settled, smallTapTargets, unhintedScrollingTables, THEMES, unique, useSystemTheme, WIDTHS, type Theme } from "./scene";

/** The page's background as the theme painted it: dark has a low luminance, light a high one. */
async function backgroundLuminance(page: Page): Promise<number> {
  return page.evaluate(() => {
    const [r, g, b] = (getComputedStyle(document.body).backgroundColor.match(/\d+/g) ?? ["0", "0", "0"]).map(Number);
    return (0.2126 * r! + 0.7152 * g! + 0.0722 * b!) / 255;
  });
}

/**
 * Every width in both themes, on one page: nothing scrolls sideways, the header collapses cleanly, no cell is
 * cut; a table that scrolls sideways says so; on a phone every control is at least a finger's size; at laptop widths
 * and wider no table needs sideways scrolling; axe finds nothing serious or critical in either
 * theme, on a phone or a laptop.
 */
async function checkEveryLayout(page: Page, ready: () => Promise<void>) {
  for (const theme of THEMES) {
    await useSystemTheme(page, theme);
    const luminance = await backgroundLuminance(page);
    if (theme === "dark") expect(luminance, "dark background").toBeLessThan(0.2);
    else expect(luminance, "light background").toBeGreaterThan(0.8);
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: width < 800 ? 844 : 1000 });
      await ready();
      await settled(page);
      expect(await layoutProblems(page), `${width} px, ${theme}`).toEqual([]);
      if (width >= 1440) expect(await scrollingTables(page), `tables scrolling sideways at ${width} px, ${theme}`).toEqual([]);
      await expect.poll(() => unhintedScrollingTables(page), { message: `tables scrolling sideways with no hint at ${width} px, ${theme}` }).toEqual([]);
      if (width === 390) expect(await smallTapTargets(page), `controls smaller than a finger at ${width} px, ${theme}`).toEqual([]);
      // A phone's layout (tables that scroll in their box) and a laptop's.
      if (width === 390 || width === 1440) expect(await accessibilityProblems(page), `axe at ${width} px, ${theme}`).toEqual([]);
    }
  }
}

test.describe("every page at every width, light and dark", () => {
  // Eight layouts and four axe runs a page: on a loaded machine axe alone takes 5 to 19 s a run on a live page, and a
  // page's test 34 s (the sign-in page) to 58 s (the demo page). The budget is for that work, with room to spare.
  test.describe.configure({ timeout: 180_000 });
  let nodes: Redis[] = [];
  let scene: Awaited<ReturnType<typeof busyLocks>> | null = null;
  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
  });
  test.afterEach(async () => {
    await scene?.stop();
    scene = null;
    for (const n of nodes) n.disconnect();
  });

  test("the locks page, with a restarted node's warning in the Nodes panel and the lock it lost", async ({ page, request, signIn }) => {
    // (Up to 102 s here: the restart, the loss, the contention and the uptime read come first.)
    test.setTimeout(240_000);
    await signIn("operator");
    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    const lostLock = unique("payments/settlement-batch");
    await nodes[1]!.set(lostLock, "settlement-worker-token", "PX", 600_000);
    await restartNodeOne(request);
    const losses = page.getByRole("table", { name: "Lost and gone" });
    await expect(losses).toContainText(lostLock, { timeout: 30_000 });
    scene = await busyLocks(nodes);
    const nodesPanel = page.getByRole("table", { name: "Lock nodes" });
    const row = page.getByRole("table", { name: "Locks" }).getByRole("row", { name: scene.hot, exact: true });
    await expect(row).toContainText(/\d+\/min/, { timeout: 30_000 });
    // The console reads a node's uptime every 30 s.
    await expect(nodesPanel.getByRole("row", { name: "node-1" })).toContainText("Restart risk", { timeout: 45_000 });
    await checkEveryLayout(page, async () => {
      await expect(row).toBeVisible();
      await expect(losses).toBeVisible();
    });
  });

  test("a lock's page", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("invoice/2024-11/reconciliation");
    await holdLock(nodes, resource, "billing-worker", "4711", 3_600_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await checkEveryLayout(page, async () => {
      await expect(page.getByRole("button", { name: "Force release" })).toBeVisible();
      await expect(page.getByRole("img", { name: /Failed acquisition attempts/ }).locator("canvas")).toBeVisible();
    });
  });

  test("the audit log", async ({ page, request, signIn }) => {
    await signIn("operator");
    const resource = unique("audit-layout");
    await releasedByScript(request, nodes, resource, "oncall-bot", "stuck after the deploy of release 2024.11.3; the worker no longer answers its health check");
    await page.goto("/audit");
    await checkEveryLayout(page, async () => {
      await expect(page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource })).toBeVisible();
    });
  });

  test("the demo page, with a run's charts and results", async ({ page, request, signIn }) => {
    await signIn("operator");
    const id = await finishedLabRun(request);
    await page.goto("/demo");
    await page.locator(`tr[data-run-id="${id}"]`).getByRole("button").click();
    await expect(page.getByRole("region", { name: "Live" })).toContainText(id);
    await checkEveryLayout(page, async () => {
      await expect(page.getByRole("figure", { name: "Units sold per second" }).locator("canvas")).toBeVisible();
    });
  });

  test("the sign-in page", async ({ page }) => {
    await page.goto("/login");
    await checkEveryLayout(page, async () => {
      await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
    });
  });
});

test("the audit log keeps long entries inside its table at laptop widths, every word of them readable", async ({ page, request, signIn, baseURL }) => {
  await signIn("operator");
  const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
  const tag = randomBytes(3).toString("hex");
  // A force release by a script with a long name, one of whose nodes answered but was left untouched: the node's
  // outcome says why in a sentence.
  const resource = unique("audit-long-node-outcome");
  const actor = `settlement-reconciliation-oncall-bot@payments-${tag}.example`;
  const nodes = await lockNodeClients(request);
  try {
    await nodes[0]!.set(resource, "batch-7f3a", "PX", 120_000);
    await nodes[1]!.set(resource, "batch-7f3a", "PX", 120_000);
    await nodes[2]!.hset(resource, "owner", "someone-else");
    const released = await request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
      data: { reason: "settlement batch died mid-run" },
      headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}`, "X-Lockscope-Actor": actor },
    });
    expect(released.status(), await released.text()).toBe(200);
    await deleteMatching(nodes, resource);
  } finally {
    for (const n of nodes) n.disconnect();
  }
  // A long list of lock patterns, as an operator who declares each team's lock families builds one: 24 globs of about
  // 80 characters. Its entry names the new list (Resource) and the one it replaced (Reason), and so does the change back.
  const read = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string; scope?: string }>; revision: string };
  const added = Array.from({ length: 24 }, (_, i) => ({ glob: `e2e-layout-${tag}/tenant-${String(i).padStart(2, "0")}/reconciliation-batch-settlement-queue-worker-lock:*` }));
  const changed = await page.request.put("/api/patterns", {
    data: {
      patterns: [...read.patterns, ...added],
      reason: `every tenant's settlement queue locks, as listed in the runbook for ${tag}. Each tenant's reconciliation worker takes one lock per batch, and the on-call team wants to see them all here, to force-release a batch that hangs after a deploy without asking the owning team for its lock's name first.`,
      revision: read.revision,
    },
    headers: { Origin: origin },
  });
  expect(changed.status(), await changed.text()).toBe(200);
  try {
    await page.goto("/audit");
    const table = page.getByRole("table", { name: "Audit entries" });
    const change = table.getByRole("row").filter({ hasText: `runbook for ${tag}` });
    const release = table.getByRole("row").filter({ hasText: resource });
    await expect(change).toHaveCount(1);
    await expect(release).toHaveCount(1);
    // Each cell holds its whole text: the new list, the node's sentence, the script's name.
    await expect(change.getByRole("cell").nth(2)).toContainText(added[23]!.glob);
    await expect(release.getByRole("listitem").filter({ hasText: "node-2" })).toHaveText("node-2: error (holds a hash that is not a token lock (or a companion key of another type): left untouched)");
    await expect(release.getByRole("cell").nth(1)).toContainText(actor);
    for (const width of [1440, 1280]) {
      await page.setViewportSize({ width, height: 1000 });
      await settled(page);
      expect(await scrollingTables(page), `tables scrolling sideways at ${width} px`).toEqual([]);
      expect(await layoutProblems(page), `${width} px`).toEqual([]);
      // The script's long name wraps between its parts ("oncall-" / "bot@payments-…"), never inside a word ("exam" / "ple").
      expect(await midWordBreaks(release.getByRole("cell").nth(1)), `the actor's name at ${width} px`).toEqual([]);
      // The change's list of 24 patterns and its long reason show their first lines: its row is about as tall as its
      // neighbours, not two screens.
      expect((await change.boundingBox())!.height, `the change's row height at ${width} px`).toBeLessThanOrEqual(200);
      // Each row's Details button stays inside the table's box, where it is seen and clicked without scrolling.
      const box = await page.getByRole("region", { name: "Audit entries, scrollable" }).boundingBox();
      for (const row of [change, release]) {
        const details = await row.getByRole("button", { name: /^Details of / }).boundingBox();
        expect(details!.x + details!.width, `the Details button's right edge at ${width} px`).toBeLessThanOrEqual(box!.x + box!.width + 0.5);
      }
    }
    // A clamped cell has a Show all button, named for its entry, that shows the whole text and hides it again, from the
    // keyboard too; a cell whose text fits has none.
    await expect(release.getByRole("button", { name: /^Show all/ })).toHaveCount(0);
    const hidesText = (button: Locator) => button.evaluate((el) => {
      const box = document.getElementById(el.getAttribute("aria-controls") ?? "");
      return box ? box.scrollHeight > box.clientHeight + 1 : null;
    });
    for (const what of ["pattern list", "reason"]) {
      const show = change.getByRole("button", { name: new RegExp(`^Show all of the ${what} (of|for) the lock-pattern change at `) });
      await expect(show).toHaveAttribute("aria-expanded", "false");
      expect(await hidesText(show), `the ${what} is clamped`).toBe(true);
      const collapsed = (await change.boundingBox())!.height;
      await show.focus();
      await page.keyboard.press("Enter");
      const less = change.getByRole("button", { name: new RegExp(`^Show less of the ${what} (of|for) the lock-pattern change at `) });
      await expect(less).toHaveAttribute("aria-expanded", "true");
      await expect(less).toBeFocused();
      expect(await hidesText(less), `the whole ${what} shows`).toBe(false);
      expect((await change.boundingBox())!.height, `the row grows to show the whole ${what}`).toBeGreaterThan(collapsed);
      await page.keyboard.press("Enter");
      await expect(show).toHaveAttribute("aria-expanded", "false");
      await expect(show).toBeFocused();
      expect(await hidesText(show), `the ${what} is clamped again`).toBe(true);
    }
    await expect(change.getByRole("cell").nth(2)).toContainText(added[23]!.glob);
  } finally {
    const now = (await (await page.request.get("/api/patterns")).json()) as { revision: string };
    const restored = await page.request.put("/api/patterns", { data: { patterns: read.patterns, reason: "end of the test", revision: now.revision }, headers: { Origin: origin } });
    expect(restored.status()).toBe(200);
  }
});

test("the theme switch pins a theme over the system's, keeps it across reloads, and paints it before any script of the app runs", async ({ page }) => {
  await useSystemTheme(page, "light");
  await page.goto("/login");
  await page.getByRole("combobox", { name: "Theme" }).selectOption("dark");
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  expect(await backgroundLuminance(page)).toBeLessThan(0.2);

  // Without the app's JavaScript (no hydration, no React): only the inline script in the page can set the theme.
  await page.route(/\/_next\/static\/.*\.js$/, (route) => route.abort());
  await page.reload();
  await expect(page.locator("html")).toHaveAttribute("data-theme", "dark");
  expect(await backgroundLuminance(page)).toBeLessThan(0.2);
  await page.unroute(/\/_next\/static\/.*\.js$/);

  await page.reload();
  await expect(page.getByRole("combobox", { name: "Theme" })).toHaveValue("dark");
  await page.getByRole("combobox", { name: "Theme" }).selectOption("system");
  await expect(page.locator("html")).not.toHaveAttribute("data-theme", /./);
  expect(await backgroundLuminance(page)).toBeGreaterThan(0.8);
  await useSystemTheme(page, "dark" satisfies Theme);
  expect(await backgroundLuminance(page)).toBeLessThan(0.2);
});

test("API messages show quoted names as code, never with backticks", async ({ page, signIn }) => {
  await signIn("viewer");
  await page.goto(`/locks/${encodeURIComponent("lock:nothing-here")}`);
  const alert = page.getByRole("main").getByRole("alert");
  await expect(alert).toContainText("No node holds lock:nothing-here");
  await expect(alert.locator("code")).toHaveText("lock:nothing-here");
  expect(await alert.innerText()).not.toContain("`");
});
