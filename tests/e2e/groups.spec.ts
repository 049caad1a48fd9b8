import { randomBytes } from "node:crypto";
import type { Page, Route } from "@playwright/test";
import type Redis from "ioredis";
import { encodeLockValue } from "@lockscope/redlock";
import { GROUP_ROWS_WINDOW } from "@/lib/locks/groups";
import { E2E_OPERATOR_TOKEN, expect, lockNodeClients, test } from "./fixtures";
import { accessibilityProblems, deleteMatching, FLEET, holdFleet, layoutProblems, settled, smallTapTargets, THEMES, unhintedScrollingTables, untilNoGroupMatches, useSystemTheme } from "./scene";

/**
 * The page's clock put in the test's hands, paused a second ahead (paused at the time it was installed, it may
 * already be past it): nothing the page times (its refresh every 10 s, a reload a second after a change) runs
 * unless `step` (`stepMs` at a time) or `page.clock.runFor` moves it.
 */
async function pauseClock(page: Page, stepMs: number): Promise<() => Promise<void>> {
  await page.clock.install();
  await page.clock.pauseAt(new Date(Date.now() + 1_000));
  return () => page.clock.runFor(stepMs);
}

/** The pages of a group's locks the page asks the console for, as `sort order offset`, in the order asked. */
function groupPagesAsked(page: Page): string[] {
  const asked: string[] = [];
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (url.pathname === "/api/locks" && url.searchParams.has("group")) asked.push(`${url.searchParams.get("sort")} ${url.searchParams.get("order")} ${url.searchParams.get("offset")}`);
  });
  return asked;
}

test.describe("grouped view of a large fleet", () => {
  let clients: Redis[] = [];
  let prefix = "";
  test.afterEach(async ({ request }) => {
    // The fleet goes, so the pages after this one see a small fleet's table again (once the console has read it go).
    if (clients.length > 0 && prefix) {
      await deleteMatching(clients, `${prefix}-*`);
      await untilNoGroupMatches(request, prefix);
    }
    for (const c of clients) c.disconnect();
    clients = [];
  });

  test("a large fleet shows one row per group; a group opens into its locks, paged, searched and sorted by the server", async ({ page, request, signIn }) => {
    // Four layouts checked with axe, then the drill-down: longer than one page's test.
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:fleet${randomBytes(2).toString("hex")}`;
    // Pages the console renders for a link before anyone follows it (a group's page, a lock's page): rows on
    // screen must not ask for them, or a scrolling table has the console render a page per row.
    const rendered: string[] = [];
    page.on("request", (r) => {
      const url = new URL(r.url());
      if (url.pathname.startsWith("/locks/") || (url.pathname === "/" && url.searchParams.has("group"))) rendered.push(url.pathname + url.search);
    });
    await page.goto("/");
    await expect(page.getByRole("table", { name: "Locks" })).toBeVisible();
    await expect(page.getByRole("table", { name: "Lock groups" })).toHaveCount(0);

    await holdFleet(clients, prefix);
    const groups = page.getByRole("table", { name: "Lock groups" });
    const orders = groups.getByRole("row", { name: `${prefix}-orders`, exact: true });
    await expect(orders).toBeVisible({ timeout: 20_000 });
    await expect(page.getByRole("table", { name: "Locks" })).toHaveCount(0);
    await expect(orders.getByRole("cell").nth(0)).toHaveText("450");
    await expect(orders.getByRole("cell").nth(1)).toHaveText("450");
    await expect(orders).toContainText("nightly-report (web-3 pid 2007)");
    await expect(groups.getByRole("row", { name: `${prefix}-mail`, exact: true }).getByRole("cell").nth(0)).toHaveText("40");

    // Both themes, a phone and a laptop: nothing cut or scrolling sideways unannounced, no control too small for a
    // finger on the phone, nothing axe calls serious.
    for (const theme of THEMES) {
      await useSystemTheme(page, theme);
      for (const width of [390, 1440]) {
        await page.setViewportSize({ width, height: width < 800 ? 844 : 1000 });
        await settled(page);
        expect(await layoutProblems(page), `${width} px, ${theme}`).toEqual([]);
        await expect.poll(() => unhintedScrollingTables(page), { message: `tables scrolling sideways with no hint at ${width} px, ${theme}` }).toEqual([]);
        if (width === 390) expect(await smallTapTargets(page), `controls smaller than a finger at ${width} px, ${theme}`).toEqual([]);
        expect(await accessibilityProblems(page), `axe at ${width} px, ${theme}`).toEqual([]);
      }
    }

    // Only this fleet's groups, sorted by size: smallest first, then largest first.
    await page.getByRole("searchbox", { name: "Filter groups" }).fill(prefix);
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length);
    await groups.getByRole("button", { name: "Locks", exact: true }).click();
    await expect(groups.getByRole("columnheader", { name: "Locks" })).toHaveAttribute("aria-sort", "ascending");
    await expect(groups.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${prefix}-mail`);
    await groups.getByRole("button", { name: "Locks", exact: true }).click();
    await expect(groups.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${prefix}-bulk`);

    expect(rendered, "pages fetched for group rows nobody opened").toEqual([]);
    await orders.getByRole("link", { name: `${prefix}-orders` }).click();
    await expect(page).toHaveURL(/\?group=/);
    // The tab names the group, as a lock's page names its lock.
    await expect(page).toHaveTitle(`${prefix}-orders · Lockscope`);
    const table = page.getByRole("table", { name: "Locks" });
    await expect(page.getByText("450 locks", { exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${prefix}-orders/job-0000`, exact: true })).toBeVisible();
    // Only the rows on screen (and a margin) are on the page, not the group's 450.
    expect(await table.locator("tbody tr[aria-label]").count()).toBeLessThan(100);
    expect(await accessibilityProblems(page), "axe on a group's locks").toEqual([]);

    // Scrolling to the end fetches the last rows from the server.
    await page.locator(".locks-scroll").evaluate((box) => box.scrollTo(0, box.scrollHeight));
    await expect(table.getByRole("row", { name: `${prefix}-orders/job-0449`, exact: true })).toBeVisible();
    expect(await table.locator("tbody tr[aria-label]").count()).toBeLessThan(100);
    expect(rendered.filter((url) => url.startsWith("/locks/")), "lock pages fetched for rows nobody opened").toEqual([]);

    // Search by holder, over every lock of the group.
    await page.getByRole("searchbox", { name: "Search this group" }).fill("nightly");
    await expect(page.getByText("1 lock matches", { exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${prefix}-orders/job-0007`, exact: true })).toContainText("nightly-report");
    await page.getByRole("searchbox", { name: "Search this group" }).fill("");

    // Sort by resource, descending: the last name comes first.
    await expect(page.getByText("450 locks", { exact: true })).toBeVisible();
    await table.getByRole("button", { name: "Resource", exact: true }).click();
    await expect(table.getByRole("columnheader", { name: "Resource" })).toHaveAttribute("aria-sort", "descending");
    await expect(table.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${prefix}-orders/job-0449`);

    // Live: a lock taken in this group comes in; one taken in another group does not.
    await Promise.all(clients.map((c) => c.set(`${prefix}-orders/job-9999`, "late-client-token", "PX", 600_000)));
    await Promise.all(clients.map((c) => c.set(`${prefix}-billing/job-9999`, "other-group-token", "PX", 600_000)));
    await expect(page.getByText("451 locks", { exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${prefix}-orders/job-9999`, exact: true })).toContainText("raw late-client-token");
    await expect(table.getByRole("row", { name: `${prefix}-billing/job-9999`, exact: true })).toHaveCount(0);

    await page.getByRole("link", { name: "← All groups" }).click();
    await expect(groups.getByRole("row", { name: `${prefix}-billing`, exact: true }).getByRole("cell").nth(0)).toHaveText("121");
  });

  test("a group's row adds up while its locks end: held, partial, TTL elapsed and ended make its locks", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:ending${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    await page.goto("/");
    const groups = page.getByRole("table", { name: "Lock groups" });
    const orders = groups.getByRole("row", { name: `${prefix}-orders`, exact: true });
    await expect(orders.getByRole("cell").nth(1)).toHaveText("450", { timeout: 30_000 });
    // Thousands written as the groups' figures are ("5,210", not "5210").
    await expect(page.locator("dl[aria-label='Live counts'] > div").filter({ hasText: "locks held" }).locator("dd")).toHaveText(/^\d{1,3}(,\d{3})+$/);
    // Filtered, the count is the matching groups' locks, beside the fleet's.
    await page.getByRole("searchbox", { name: "Filter groups" }).fill(`${prefix}-orders`);
    await expect(groups.getByRole("row")).toHaveCount(2);
    await expect(page.locator(".locks-tools .locks-count")).toHaveText(/^1 group matches: 450 locks \(of [\d,]+ in all\)$/);
    // Read out once the server's answer to the filter came, never an earlier filter's count.
    await expect(page.locator(".locks-tools [role=status]")).toHaveText(/^Filtered: 1 group matches: 450 locks \(of [\d,]+ in all\)$/);
    const column = async (name: string) => (await groups.getByRole("columnheader").allTextContents()).findIndex((text) => text.trim() === name) - 1;

    const ended = await column("Ended");
    expect(ended, "an Ended column").toBeGreaterThan(0);
    // Three of the group's locks are released: listed a few seconds more, as ended, and no longer held. (One row as
    // drawn, read at once: the figures of one refresh.)
    await Promise.all(clients.map((c) => c.del(`${prefix}-orders/job-0001`, `${prefix}-orders/job-0002`, `${prefix}-orders/job-0003`)));
    await expect
      .poll(async () => {
        const cells = await orders.getByRole("cell").allTextContents();
        return [cells[0], cells[1], cells[ended]].join(" ");
      })
      .toBe("450 447 3");
  });

  test("a group's table sorted by TTL or searched by holder is ordered again when a lock on screen changes, not only at its periodic refresh", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:resort${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-jobs`;
    // One value on every node, as a real holder writes it.
    const hold = (name: string, label: string, ttlMs: number) => {
      const value = encodeLockValue({ label, host: "web-1", pid: 7, fence: null, acquiredAt: Date.now() });
      return Promise.all(clients.map((c) => c.set(`${group}/${name}`, value, "PX", ttlMs)));
    };
    await hold("a", "alpha-worker", 60_000);
    await hold("b", "beta-worker", 120_000);
    await hold("c", "gamma-worker", 180_000);
    // The page's clock is the test's, moved only by `step` (a tenth of a second at a time) and `runFor`: a few
    // seconds in all, so no periodic refresh of the pages (every 10 s) comes, and what the table shows after a
    // change is what the live stream made of it.
    const step = await pauseClock(page, 100);
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const table = page.getByRole("table", { name: "Locks" });
    const order = async () => (await step(), await table.locator("tbody tr[aria-label]").evaluateAll((rows) => rows.map((r) => r.getAttribute("aria-label"))));
    await expect.poll(order, { timeout: 30_000 }).toEqual([`${group}/a`, `${group}/b`, `${group}/c`]);
    // TTL, longest first.
    await table.getByRole("button", { name: "TTL" }).click();
    await table.getByRole("button", { name: "TTL" }).click();
    await expect(table.getByRole("columnheader", { name: "TTL" })).toHaveAttribute("aria-sort", "descending");
    await expect.poll(order).toEqual([`${group}/c`, `${group}/b`, `${group}/a`]);
    // (Whatever the pages ask on their own after the sort comes before the change.)
    await page.clock.runFor(3_000);

    // a's holder extends it to 10 minutes: its row says so at once, and once the table has caught up (a second or
    // two of the page's time, far from its periodic refresh) it is first, where its TTL puts it.
    await Promise.all(clients.map((c) => c.pexpire(`${group}/a`, 600_000)));
    const ttlOfA = table.getByRole("row", { name: `${group}/a`, exact: true }).locator(".ttl-text");
    await expect.poll(async () => (await step(), await ttlOfA.textContent())).toMatch(/^(9|10) min/);
    // (The console serves a sorted list up to a second old, as the table asks again a second after a change: a
    // second of real time passes too.)
    await page.waitForTimeout(1_000);
    await page.clock.runFor(2_000);
    await expect.poll(order).toEqual([`${group}/a`, `${group}/c`, `${group}/b`]);

    // Searched by holder: a lock taken over by another holder no longer matches, and leaves the results.
    await page.getByRole("searchbox", { name: "Search this group" }).fill("beta-worker");
    await expect.poll(order).toEqual([`${group}/b`]);
    await page.clock.runFor(3_000);
    await hold("b", "delta-worker", 120_000);
    const holderOfB = table.getByRole("row", { name: `${group}/b`, exact: true }).locator(".col-holder");
    await expect.poll(async () => (await step(), await holderOfB.textContent())).toContain("delta-worker");
    await page.waitForTimeout(1_000);
    await page.clock.runFor(2_000);
    await expect.poll(order).toEqual([]);
    await expect(page.getByText("No lock in this group matches the search.")).toBeVisible();
  });

  test("a new sort in a group's table scrolled down asks the console for its first rows only, not for the rows where it was scrolled", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:onesort${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-jobs`;
    const name = (i: number) => `${group}/job-${String(i).padStart(4, "0")}`;
    for (const c of clients) {
      const pipeline = c.pipeline();
      for (let i = 0; i < 400; i++) pipeline.set(name(i), `holder-${i}`, "PX", 600_000);
      await pipeline.exec();
    }
    // The page's clock is the test's (a hundredth of a second at a time, and `runFor`).
    const step = await pauseClock(page, 10);
    const asked = groupPagesAsked(page);
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const count = page.locator(".locks-tools .locks-count");
    await expect.poll(async () => (await step(), await count.textContent()), { timeout: 30_000 }).toBe("400 locks");
    // (The pages ask once more a second after the tab's stream of the group starts: that comes first.)
    await page.clock.runFor(3_000);
    const table = page.getByRole("table", { name: "Locks" });
    // Scrolled to the 200th row: its pages come.
    await page.locator(".locks-scroll").evaluate((box) => box.scrollTo(0, 38 * 200));
    await expect.poll(async () => (await step(), await table.getByRole("row", { name: name(200), exact: true }).count())).toBe(1);

    await table.getByRole("button", { name: "Resource", exact: true }).click();
    await expect(table.getByRole("columnheader", { name: "Resource" })).toHaveAttribute("aria-sort", "descending");
    // The table starts at its top, the last name first.
    await expect.poll(async () => (await step(), await table.getByRole("row").nth(1).getAttribute("aria-label"))).toBe(name(399));
    await page.clock.runFor(3_000);
    // (Real time too, for a request sent last to be seen.)
    await page.waitForTimeout(500);
    expect(asked.filter((a) => a.startsWith("resource desc"))).toEqual(["resource desc 0"]);
  });

  test("a group's table scrolled while locks are taken ahead of it shows each lock once and skips none", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:churnpage${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-jobs`;
    const name = (i: number) => `${group}/job-${String(i).padStart(4, "0")}`;
    for (const c of clients) {
      const pipeline = c.pipeline();
      for (let i = 0; i < 300; i++) pipeline.set(name(i), `holder-${i}`, "PX", 600_000);
      await pipeline.exec();
    }
    // The page's clock is the test's: the reload a change on screen schedules a second later does not run.
    const step = await pauseClock(page, 10);
    await page.setViewportSize({ width: 1440, height: 1000 });
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const count = page.locator(".locks-tools .locks-count");
    await expect.poll(async () => (await step(), await count.textContent()), { timeout: 30_000 }).toBe("300 locks");
    // Scrolled to the 190th row, the rows on screen come from two pages: the one from row 100 and the one from row
    // 200. The second waits until three locks were taken ahead of them both.
    const held: Route[] = [];
    const laterPage = (url: URL) => url.pathname === "/api/locks" && url.searchParams.get("group") === group && url.searchParams.get("offset") !== "0" && url.searchParams.get("offset") !== "100";
    await page.route(laterPage, (route) => void held.push(route));
    await page.locator(".locks-scroll").evaluate((box) => box.scrollTo(0, 38 * 190));
    const table = page.getByRole("table", { name: "Locks" });
    await expect.poll(async () => (await step(), await table.getByRole("row", { name: name(195), exact: true }).count())).toBe(1);
    await expect.poll(async () => (await step(), held.length)).toBeGreaterThan(0);
    for (const suffix of ["a", "b", "c"]) await Promise.all(clients.map((c) => c.set(`${name(10)}${suffix}`, `ahead-${suffix}`, "PX", 600_000)));
    await expect
      .poll(async () => ((await (await page.request.get(`/api/locks?group=${encodeURIComponent(group)}&limit=1`)).json()) as { total: number }).total)
      .toBe(303);
    for (const route of held) await route.continue();
    await page.unroute(laterPage);

    await expect.poll(async () => (await step(), await table.getByRole("row", { name: name(205), exact: true }).count())).toBe(1);
    const shown = await table.locator("tbody tr[aria-label]").evaluateAll((rows) => rows.map((r) => r.getAttribute("aria-label") ?? ""));
    expect(shown.filter((r, i) => shown.indexOf(r) !== i), "rows shown twice").toEqual([]);
    // The rows on screen follow one another, none skipped.
    const numbers = shown.map((r) => Number(r.slice(-4)));
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => numbers[0]! + i));
    expect(numbers).toContain(199);
    expect(numbers).toContain(200);
  });

  test("a group's table asks the console once for a new sort order given right after a change on screen, not once more a second later", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:flip${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-jobs`;
    for (const [name, ttlMs] of [["a", 60_000], ["b", 120_000], ["c", 180_000]] as const) await Promise.all(clients.map((c) => c.set(`${group}/${name}`, `holder-${name}`, "PX", ttlMs)));
    const step = await pauseClock(page, 10);
    const asked = groupPagesAsked(page);
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const table = page.getByRole("table", { name: "Locks" });
    const order = async () => (await step(), await table.locator("tbody tr[aria-label]").evaluateAll((rows) => rows.map((r) => r.getAttribute("aria-label"))));
    await expect.poll(order, { timeout: 30_000 }).toEqual([`${group}/a`, `${group}/b`, `${group}/c`]);
    // (Its rows in, before the change: a change that comes while they are on their way reloads them a second later.)
    const sorted = page.waitForResponse((r) => r.url().includes("sort=ttl&order=asc"));
    await table.getByRole("button", { name: "TTL" }).click();
    await expect(table.getByRole("columnheader", { name: "TTL" })).toHaveAttribute("aria-sort", "ascending");
    await sorted;
    await page.clock.runFor(3_000);

    // a's holder extends it: its row says so at once (the table will ask for its rows again a second later, to put it
    // in its place)...
    await Promise.all(clients.map((c) => c.pexpire(`${group}/a`, 600_000)));
    const ttlOfA = table.getByRole("row", { name: `${group}/a`, exact: true }).locator(".ttl-text");
    await expect.poll(async () => (await step(), await ttlOfA.textContent())).toMatch(/^(9|10) min/);
    // The row may show it once two of the three nodes' extensions are in: the last one's change, coming after the
    // click below, would rightly reload the new order a second later (under load it did). So the console has read
    // all three, and their changes have reached the page (its listeners take them as they come), before the click.
    const detail = async () => (await (await request.get(`/api/locks/${encodeURIComponent(`${group}/a`)}`, { headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` } })).json()) as { nodes: Array<{ pttlMs: number | null }> };
    await expect.poll(async () => (await detail()).nodes.map((n) => (n.pttlMs ?? 0) > 500_000)).toEqual([true, true, true]);
    await page.waitForTimeout(500);
    asked.length = 0;
    // ...but the viewer sorts the other way first: the rows come in that order, asked for once.
    await table.getByRole("button", { name: "TTL" }).click();
    await expect(table.getByRole("columnheader", { name: "TTL" })).toHaveAttribute("aria-sort", "descending");
    await expect.poll(order).toEqual([`${group}/a`, `${group}/c`, `${group}/b`]);
    await page.clock.runFor(3_000);
    await page.waitForTimeout(500);
    expect(asked.filter((a) => a.startsWith("ttl desc"))).toEqual(["ttl desc 0"]);
  });

  test("a lock's page in a large fleet, and its release dialog, receive that lock's changes, not the whole fleet, and stay live", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("operator");
    clients = await lockNodeClients(request);
    prefix = `lock:onepage${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    const resource = `${prefix}-orders/job-0007`;
    await expect
      .poll(async () => ((await (await request.get(`/api/locks/groups?q=${encodeURIComponent(prefix)}`, { headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` } })).json()) as { locks: number }).locks, { timeout: 60_000 })
      .toBeGreaterThan(5_000);
    // What the tab receives of locks: the lock lists it asks for and the lock events of its stream, in characters.
    await page.addInitScript(() => {
      const counted = window as unknown as { lockChars: number };
      counted.lockChars = 0;
      const Native = window.EventSource;
      window.EventSource = class extends Native {
        constructor(url: string | URL, init?: EventSourceInit) {
          super(url, init);
          for (const type of ["snapshot", "lock"]) this.addEventListener(type, (e) => (counted.lockChars += String(e.data).length));
        }
      };
    });
    const lists: Array<Promise<number>> = [];
    page.on("response", (response) => {
      if (new URL(response.url()).pathname === "/api/locks") lists.push(response.body().then((body) => body.length, () => 0));
    });
    const received = async () => (await Promise.all(lists)).reduce((a, b) => a + b, 0) + (await page.evaluate(() => (window as unknown as { lockChars: number }).lockChars));

    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog");
    await expect(dialog).toBeVisible();
    // Both follow the lock live: its holder extends it to an hour.
    await Promise.all(clients.map((c) => c.pexpire(resource, 3_600_000)));
    await expect(page.locator(".detail-grid .ttl-text")).toHaveText(/^59 min/);
    await expect(dialog).toContainText(/TTL left\s*3[56]\d\d s/);
    // The fleet is 5,210 locks, several MB as the console sends them: the page and its dialog took a few KB.
    expect(await received()).toBeLessThan(100_000);
  });

  test("a lock's page in a large fleet leads back to its group, not to the list of every group", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:back${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    const group = `${prefix}-orders`;
    const resource = `${group}/job-0007`;
    await page.goto("/");
    const groups = page.getByRole("table", { name: "Lock groups" });
    await expect(groups.getByRole("row", { name: group, exact: true })).toBeVisible({ timeout: 60_000 });
    await groups.getByRole("link", { name: group, exact: true }).click();
    const table = page.getByRole("table", { name: "Locks" });
    await table.getByRole("link", { name: resource, exact: true }).click();
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();

    const back = page.getByRole("link", { name: `← ${group}` });
    await expect(back).toBeVisible();
    await back.click();
    await expect(page).toHaveURL(`/?group=${encodeURIComponent(group)}`);
    await expect(page.getByRole("heading", { level: 2, name: group })).toBeVisible();
    await expect(table.getByRole("row", { name: resource, exact: true })).toBeVisible();

    // Searched and sorted, the group's table is where the lock's link leads back to, as the browser's Back does.
    const search = page.getByRole("searchbox", { name: "Search this group" });
    await search.fill("job-000");
    await expect(page.getByText("10 locks match", { exact: true })).toBeVisible();
    await table.getByRole("button", { name: "Resource", exact: true }).click();
    await expect(table.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${group}/job-0009`);
    await table.getByRole("link", { name: resource, exact: true }).click();
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
    await back.click();
    await expect(page).toHaveURL(`/?group=${encodeURIComponent(group)}&q=job-000&sort=resource&order=desc`);
    await expect(search).toHaveValue("job-000");
    await expect(page.getByText("10 locks match", { exact: true })).toBeVisible();
    await expect(table.getByRole("columnheader", { name: "Resource" })).toHaveAttribute("aria-sort", "descending");
    await expect(table.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${group}/job-0009`);

    // Another group's table, shown last, is not this lock's way back: its own group's address is.
    await page.goto(`/?group=${encodeURIComponent(`${prefix}-mail`)}&q=x`);
    await expect(page.getByRole("heading", { level: 2, name: `${prefix}-mail` })).toBeVisible();
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await back.click();
    await expect(page).toHaveURL(`/?group=${encodeURIComponent(group)}`);
    await expect(search).toHaveValue("");
  });

  test("the groups' filter is kept when a group opened from it leads back, by its link and by the browser's Back", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:keep${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    await page.goto("/");
    const groups = page.getByRole("table", { name: "Lock groups" });
    const orders = groups.getByRole("row", { name: `${prefix}-orders`, exact: true });
    await expect(orders).toBeVisible({ timeout: 60_000 });
    const filter = page.getByRole("searchbox", { name: "Filter groups" });
    await filter.fill(prefix);
    // (Once the typing settles: the filter is in the address, as the deployment chosen is.)
    await expect(page).toHaveURL(`/?filter=${encodeURIComponent(prefix)}`);
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length);

    await orders.getByRole("link", { name: `${prefix}-orders` }).click();
    await expect(page.getByText(`${FLEET.orders} locks`, { exact: true })).toBeVisible();
    await page.getByRole("link", { name: "← All groups" }).click();
    await expect(filter).toHaveValue(prefix);
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length);
    // Back on the whole fleet, the tab no longer names a group.
    await expect(page).toHaveTitle("Lockscope");

    await orders.getByRole("link", { name: `${prefix}-orders` }).click();
    await expect(page.getByText(`${FLEET.orders} locks`, { exact: true })).toBeVisible();
    await page.goBack();
    await expect(filter).toHaveValue(prefix);
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length);
  });

  test("the groups' sort is kept in the address: a group opened from it leads Back to it, and a reload keeps it", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:order${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    await page.goto(`/?filter=${encodeURIComponent(prefix)}`);
    const groups = page.getByRole("table", { name: "Lock groups" });
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length, { timeout: 60_000 });
    // Largest first.
    await groups.getByRole("button", { name: "Locks", exact: true }).click();
    await groups.getByRole("button", { name: "Locks", exact: true }).click();
    const shown = async () => {
      await expect(groups.getByRole("columnheader", { name: "Locks" })).toHaveAttribute("aria-sort", "descending");
      await expect(groups.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${prefix}-bulk`);
      await expect(page.getByRole("searchbox", { name: "Filter groups" })).toHaveValue(prefix);
    };
    await shown();
    await groups.getByRole("row", { name: `${prefix}-orders`, exact: true }).getByRole("link").click();
    await expect(page.getByText(`${FLEET.orders} locks`, { exact: true })).toBeVisible();
    await page.goBack();
    await shown();
    await page.reload();
    await shown();
  });

  test("a group's search and sort are kept in the address: a lock opened from it leads Back to them, and a reload keeps them", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:within${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    await page.goto(`/?group=${encodeURIComponent(`${prefix}-orders`)}`);
    await expect(page.getByText(`${FLEET.orders} locks`, { exact: true })).toBeVisible({ timeout: 60_000 });
    const search = page.getByRole("searchbox", { name: "Search this group" });
    const table = page.getByRole("table", { name: "Locks" });
    // Ten locks, job-0010 to job-0019, last name first.
    await search.fill("job-001");
    await expect(page.getByText("10 locks match", { exact: true })).toBeVisible();
    await table.getByRole("button", { name: "Resource", exact: true }).click();
    const shown = async () => {
      await expect(search).toHaveValue("job-001");
      await expect(page.getByText("10 locks match", { exact: true })).toBeVisible();
      await expect(table.getByRole("columnheader", { name: "Resource" })).toHaveAttribute("aria-sort", "descending");
      await expect(table.getByRole("row").nth(1)).toHaveAttribute("aria-label", `${prefix}-orders/job-0019`);
    };
    await shown();

    await table.getByRole("row", { name: `${prefix}-orders/job-0013`, exact: true }).getByRole("link").click();
    await expect(page.getByRole("heading", { level: 1, name: `${prefix}-orders/job-0013` })).toBeVisible();
    await page.goBack();
    await shown();
    await page.reload();
    await shown();
  });

  test("a group opened the moment the groups' filter is typed opens, and its way back keeps that filter", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:quick${randomBytes(2).toString("hex")}`;
    await holdFleet(clients, prefix);
    await page.goto("/");
    const groups = page.getByRole("table", { name: "Lock groups" });
    const orders = groups.getByRole("row", { name: `${prefix}-orders`, exact: true });
    await expect(orders).toBeVisible({ timeout: 60_000 });
    // The click comes before the filter has reached the server (a quarter of a second after the typing): the
    // filter's own update of the address must not undo the way into the group.
    await page.getByRole("searchbox", { name: "Filter groups" }).fill(prefix);
    await orders.getByRole("link", { name: `${prefix}-orders` }).click();
    await expect(page.getByText(`${FLEET.orders} locks`, { exact: true })).toBeVisible();
    await expect(page).toHaveURL(`/?group=${encodeURIComponent(`${prefix}-orders`)}&filter=${encodeURIComponent(prefix)}`);
    await page.getByRole("link", { name: "← All groups" }).click();
    await expect(page.getByRole("searchbox", { name: "Filter groups" })).toHaveValue(prefix);
    await expect(groups.getByRole("row")).toHaveCount(1 + Object.keys(FLEET).length);
  });

  test("a group larger than a table can scroll is shown a range of rows at a time, with the way to the next and back", async ({ page, request, signIn }) => {
    test.setTimeout(180_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:huge${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-all`;
    const count = GROUP_ROWS_WINDOW + 20;
    // Written by a script on each node (one round trip for all of them), each with its own holder.
    const hold = "for i = 0, tonumber(ARGV[2]) - 1 do redis.call('set', string.format('%s/job-%06d', ARGV[1], i), 'huge-holder-' .. i, 'px', 600000) end";
    await Promise.all(clients.map((c) => c.eval(hold, 0, group, String(count))));

    await page.goto(`/?group=${encodeURIComponent(group)}`);
    await expect(page.getByText(`${count.toLocaleString("en")} locks`, { exact: true })).toBeVisible({ timeout: 90_000 });
    const rows = page.getByRole("navigation", { name: "Rows of this group" });
    await expect(rows).toContainText(`Rows 1–100,000 of ${count.toLocaleString("en")}`);
    await expect(rows.getByRole("button", { name: /Previous/ })).toBeDisabled();
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table.getByRole("row", { name: `${group}/job-000000`, exact: true })).toBeVisible();

    // The end of this range is as far as the table scrolls: row 100,000, the next range's rows not in it.
    await page.locator(".locks-scroll").evaluate((box) => box.scrollTo(0, box.scrollHeight));
    await expect(table.getByRole("row", { name: `${group}/job-099999`, exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${group}/job-099999`, exact: true })).toHaveAttribute("aria-rowindex", String(100_000 + 1));
    await expect(table.getByRole("row", { name: `${group}/job-100000`, exact: true })).toHaveCount(0);

    await rows.getByRole("button", { name: /Next/ }).click();
    await expect(rows).toContainText(`Rows 100,001–${count.toLocaleString("en")} of ${count.toLocaleString("en")}`);
    await expect(rows.getByRole("button", { name: /Next/ })).toBeDisabled();
    const first = table.getByRole("row", { name: `${group}/job-100000`, exact: true });
    await expect(first).toContainText("huge-holder-100000");
    await expect(first).toHaveAttribute("aria-rowindex", String(100_000 + 2));
    await expect(table.getByRole("row", { name: `${group}/job-100019`, exact: true })).toBeVisible();
    expect(await table.locator("tbody tr[aria-label]").count()).toBe(20);
    expect(await accessibilityProblems(page), "axe on a range of a large group").toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    await settled(page);
    expect(await layoutProblems(page), "a range of a large group at 390 px").toEqual([]);
    await page.setViewportSize({ width: 1440, height: 1000 });

    await rows.getByRole("button", { name: /Previous/ }).click();
    await expect(rows).toContainText("Rows 1–100,000");
    await expect(table.getByRole("row", { name: `${group}/job-000000`, exact: true })).toBeVisible();
  });

  test("a large group's range of rows is read out when the operator moves it, not each time a lock comes or goes", async ({ page, signIn }) => {
    await signIn("viewer");
    const group = "lock:range-read-out";
    // A group of more than one range, whose total moves as locks are taken (its pages read again every 10 s).
    let total = GROUP_ROWS_WINDOW + 20;
    await page.route(/\/api\/locks\?group=/, (route: Route) => route.fulfill({ json: { serverTime: Date.now(), total, offset: 0, locks: [], next: null } }));
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const rows = page.getByRole("navigation", { name: "Rows of this group" });
    await expect(rows).toContainText("Rows 1–100,000 of 100,020");
    // What a screen reader reads out of the range: its live region's text.
    const readOut = () => rows.locator("[aria-live], [role='status']").evaluateAll((els) => els.map((el) => el.textContent ?? "").join(" | "));
    const before = await readOut();

    total += 1;
    await expect(rows).toContainText("Rows 1–100,000 of 100,021", { timeout: 20_000 });
    expect(await readOut(), "read out again for a lock taken").toBe(before);

    await rows.getByRole("button", { name: /Next/ }).click();
    await expect(rows).toContainText("Rows 100,001–100,021 of 100,021");
    await expect.poll(readOut).toContain("Rows 100,001–100,021 of 100,021");
  });

  test("a large group's Next and Previous, pressed from the keyboard up to the last and first range, keep focus there", async ({ page, signIn }) => {
    await signIn("viewer");
    const group = "lock:range-keyboard";
    const total = GROUP_ROWS_WINDOW + 20;
    await page.route(/\/api\/locks\?group=/, (route: Route) => route.fulfill({ json: { serverTime: Date.now(), total, offset: 0, locks: [], next: null } }));
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    const rows = page.getByRole("navigation", { name: "Rows of this group" });
    await expect(rows).toContainText("Rows 1–100,000 of 100,020");
    const previous = rows.getByRole("button", { name: /Previous/ });
    const next = rows.getByRole("button", { name: /Next/ });

    // Next takes the last range: focus stays on it (not on the page's top), and it says it can go no further.
    await next.focus();
    await page.keyboard.press("Enter");
    await expect(rows).toContainText("Rows 100,001–100,020 of 100,020");
    await expect(rows.getByRole("status")).toHaveText("Rows 100,001–100,020 of 100,020");
    await expect(next).toBeFocused();
    await expect(next).toHaveAttribute("aria-disabled", "true");
    // Pressed again, it does nothing.
    await page.keyboard.press("Enter");
    await expect(rows).toContainText("Rows 100,001–100,020 of 100,020");
    await expect(next).toBeFocused();

    // Back with Previous (Shift+Tab reaches it from Next), to the first range.
    await page.keyboard.press("Shift+Tab");
    await expect(previous).toBeFocused();
    await expect(previous).not.toHaveAttribute("aria-disabled", "true");
    await page.keyboard.press(" ");
    await expect(rows.getByRole("status")).toHaveText("Rows 1–100,000 of 100,020");
    await expect(previous).toBeFocused();
    await expect(previous).toHaveAttribute("aria-disabled", "true");
  });

  test("a group's rows still on their way are one row across the table at every width, the columns in their places", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    prefix = `lock:loading${randomBytes(2).toString("hex")}`;
    const group = `${prefix}-jobs`;
    for (const c of clients) {
      const pipeline = c.pipeline();
      for (let i = 0; i < 300; i++) pipeline.set(`${group}/job-${String(i).padStart(4, "0")}`, `holder-${i}`, "PX", 600_000);
      await pipeline.exec();
    }
    // The group's rows after the first page never come: scrolled there, the table shows them loading.
    await page.route(
      (url) => url.pathname === "/api/locks" && url.searchParams.get("group") === group && url.searchParams.get("offset") !== "0",
      () => undefined,
    );
    await page.setViewportSize({ width: 1440, height: 1000 });
    await page.goto(`/?group=${encodeURIComponent(group)}`);
    await expect(page.getByText("300 locks", { exact: true })).toBeVisible({ timeout: 30_000 });
    await page.locator(".locks-scroll").evaluate((box) => box.scrollTo(0, 38 * 200));
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table.getByRole("row", { name: "Loading…" }).first()).toBeVisible();
    // The count still says how many there are: they are known, only these rows are not.
    await expect(page.locator(".locks-tools .locks-count")).toHaveText("300 locks");

    // Where the row's cells start and end, and where the header's do (the columns a width shows, and the resource's share).
    const extent = () =>
      table.evaluate((el) => {
        const span = (cells: Element[]) => {
          const boxes = cells.map((c) => c.getBoundingClientRect()).filter((r) => r.width > 0);
          return `${Math.round(Math.min(...boxes.map((r) => r.left)))}–${Math.round(Math.max(...boxes.map((r) => r.right)))}`;
        };
        const head = [...el.querySelectorAll("thead th")];
        const loading = [...el.querySelectorAll("tbody tr")].find((r) => r.textContent?.includes("Loading…"));
        return { header: span(head), loading: loading ? span([...loading.children]) : "none" };
      });
    for (const width of [1440, 1100, 390]) {
      await page.setViewportSize({ width, height: width < 800 ? 844 : 1000 });
      await settled(page);
      const { header, loading } = await extent();
      expect(loading, `the loading row at ${width} px`).toBe(header);
      expect(await layoutProblems(page), `${width} px`).toEqual([]);
    }
    expect(await accessibilityProblems(page), "axe on rows loading").toEqual([]);
  });

  test("a group's table that cannot read its locks says why in the page's words: no answer, a refusal, a session ended", async ({ page, signIn }) => {
    await signIn("viewer");
    const group = `lock:unread${randomBytes(2).toString("hex")}-jobs`;
    const answers: Array<{ answer: (route: Route) => Promise<void>; says: string }> = [
      { answer: (route) => route.abort("connectionrefused"), says: "Could not load the locks: the console did not answer." },
      { answer: (route) => route.fulfill({ status: 503, json: { error: { code: "unavailable", message: "The console is shutting down." } } }), says: "Could not load the locks: The console is shutting down." },
      {
        answer: (route) => route.fulfill({ status: 401, json: { error: { code: "unauthorized", message: "Sign in on /login or send `Authorization: Bearer <token>`." } } }),
        says: "Could not load the locks: You are not signed in, or your session has ended: sign in again, then try once more.",
      },
    ];
    const groupPages = (url: URL) => url.pathname === "/api/locks" && url.searchParams.get("group") === group;
    for (const { answer, says } of answers) {
      await page.unroute(groupPages);
      await page.route(groupPages, answer);
      await page.goto(`/?group=${encodeURIComponent(group)}`);
      await expect(page.getByRole("alert").filter({ hasText: "Could not load the locks" })).toHaveText(says);
    }
  });
});
