import { randomBytes } from "node:crypto";
import AxeBuilder from "@axe-core/playwright";
import type { APIRequestContext, Locator, Page } from "@playwright/test";
import type Redis from "ioredis";
import { Redlock } from "@lockscope/redlock";
import { encodeLockValue } from "@lockscope/redlock";
import { E2E_OPERATOR_TOKEN, expect } from "./fixtures";

export const WIDTHS = [390, 820, 1440, 2560] as const;
export const THEMES = ["light", "dark"] as const;
export type Theme = (typeof THEMES)[number];

export const unique = (name: string) => `lock:e2e/${name}-${randomBytes(3).toString("hex")}`;

/** A lock held on every embedded node, as the engine would write it (label, host, pid, fence). */
export async function holdLock(nodes: Redis[], resource: string, label: string, fence: string | null, ttlMs = 120_000): Promise<string> {
  const value = encodeLockValue({ label, host: "e2e-host", pid: 4242, fence, acquiredAt: Date.now() });
  await Promise.all(nodes.map((n) => n.set(resource, value, "PX", ttlMs)));
  return value;
}

/** Serious and critical axe findings, one line each (rule, impact, where). */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]).analyze();
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(" ")} — ${n.failureSummary?.split("\n")[1]?.trim() ?? v.help}`));
}

/**
 * Waits for the next two frames: the layout (and anything a ResizeObserver redraws) has settled. Headless Chromium
 * now and then stops drawing a page's frames (no requestAnimationFrame callback runs; seen once in CI, right after
 * a resize, until the test's timeout): after 5 s without a frame the page is brought to the front and its viewport
 * set again, which has it draw; a page that still draws nothing fails with what it says of itself.
 */
export async function settled(page: Page): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const drawn = await page.evaluate(
      () =>
        new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 5_000);
          requestAnimationFrame(() =>
            requestAnimationFrame(() => {
              clearTimeout(timer);
              resolve(true);
            }),
          );
        }),
    );
    if (drawn) return;
    if (attempt === 3) throw new Error(`the page drew no frame in 15 s (document.visibilityState ${await page.evaluate(() => document.visibilityState)})`);
    await page.bringToFront();
    const size = page.viewportSize();
    if (size) {
      await page.setViewportSize({ width: size.width, height: size.height + 1 });
      await page.setViewportSize(size);
    }
  }
}

/**
 * What a person would call broken at this width, as sentences (empty when nothing is):
 * the page scrolls sideways; a header item leaves the screen, is clipped, wraps its text ("node-/0") or overlaps
 * another; a table cell hides part of its text without an ellipsis and a title carrying the rest ("no TT").
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    const root = document.documentElement;
    if (root.scrollWidth > window.innerWidth) problems.push(`the page scrolls sideways: ${root.scrollWidth} px wide in a ${window.innerWidth} px window`);
    const visible = (el: Element) => {
      const r = el.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden";
    };
    const name = (el: Element) => (el.textContent ?? "").trim().replace(/\s+/g, " ").slice(0, 40) || el.tagName.toLowerCase();

    const header = document.querySelector("header");
    if (!header) problems.push("no header");
    else {
      const items = [...header.querySelectorAll("a, button, select, .node-pill, .status-text, [aria-label='Signed in as']")].filter(visible);
      for (const el of items) {
        const r = el.getBoundingClientRect();
        if (r.left < 0 || r.right > window.innerWidth + 0.5) problems.push(`header item "${name(el)}" is cut off by the window edge`);
        if (el.scrollWidth > el.clientWidth + 1 && el.tagName !== "SELECT") problems.push(`header item "${name(el)}" is clipped`);
      }
      const walker = document.createTreeWalker(header, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.textContent?.trim() || !node.parentElement || !visible(node.parentElement)) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`header text "${node.textContent.trim()}" wraps onto ${lines.size} lines`);
      }
      // Leaf items only: a pill contains its dot, the session group its button.
      const leaves = items.filter((el) => !items.some((other) => other !== el && el.contains(other)));
      for (let i = 0; i < leaves.length; i++) {
        for (let j = i + 1; j < leaves.length; j++) {
          const a = leaves[i]!.getBoundingClientRect();
          const b = leaves[j]!.getBoundingClientRect();
          const overlap = Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
          if (overlap) problems.push(`header items "${name(leaves[i]!)}" and "${name(leaves[j]!)}" overlap`);
        }
      }
    }

    for (const cell of document.querySelectorAll("main td, main th")) {
      if (!visible(cell) || cell.scrollWidth <= cell.clientWidth + 1) continue;
      const style = getComputedStyle(cell);
      if (style.overflowX === "visible") continue;
      const explained = cell.hasAttribute("data-truncates") && style.textOverflow === "ellipsis" && (cell.getAttribute("title") ?? "") !== "";
      if (!explained) problems.push(`table cell "${name(cell)}" is cut off`);
    }
    return problems;
  });
}

/** Table boxes that need sideways scrolling (fine on a phone, not on a laptop screen). */
export async function scrollingTables(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll(".table-scroll, .locks-scroll")]
      .filter((box) => box.scrollWidth > box.clientWidth + 1)
      .map((box) => box.querySelector("table")?.getAttribute("aria-label") ?? "a table"),
  );
}

/** Switches the system colour scheme the page sees (the console follows it unless the switch pins one). */
export async function useSystemTheme(page: Page, theme: Theme): Promise<void> {
  await page.emulateMedia({ colorScheme: theme });
}

const auth = { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` };

/** Starts a lab run (the API takes the settings as the Demo page's form sends them) and returns its id. */
async function startRun(request: APIRequestContext, settings: Record<string, unknown>): Promise<string> {
  // A 503 (the lab's lease not taken: the nodes did not answer within 200 ms, as right after an earlier spec
  // deleted a fleet of 100,000 locks) is asked again, as the Demo page's user would, for up to 15 s.
  let started = await request.post("/api/demo/runs", { headers: auth, data: settings });
  for (const until = Date.now() + 15_000; started.status() === 503 && Date.now() < until; ) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    started = await request.post("/api/demo/runs", { headers: auth, data: settings });
  }
  expect(started.status(), await started.text()).toBe(202);
  return ((await started.json()) as { id: string }).id;
}

async function run(request: APIRequestContext, id: string): Promise<{ status: string; fault?: { startedAtMs: number | null; endedAtMs: number | null } }> {
  return (await (await request.get(`/api/demo/runs/${id}`, { headers: auth })).json()) as { status: string; fault?: { startedAtMs: number | null; endedAtMs: number | null } };
}

/** A short lab run with pauses past the TTL, played to its end: the Demo page has a result and charts to show. */
export async function finishedLabRun(request: APIRequestContext, strategy = "redlock"): Promise<string> {
  const id = await startRun(request, { strategy, stock: 60, workers: 8, ttlMs: 200, workMs: 5, pause: { probability: 0.04, ms: 450 } });
  await expect.poll(async () => (await run(request, id)).status, { timeout: 60_000 }).not.toBe("running");
  return id;
}

/**
 * Node 1 killed by a lab run and restarted empty while the console watches it, then the run cancelled: once a
 * lock outlives node 1's new uptime, the Nodes panel warns of the restart. The console counts only a restart it
 * saw from more than 5 s away, hence a kill 6 s into the run (call it after the console's live view is up).
 */
export async function restartNodeOne(request: APIRequestContext): Promise<void> {
  const id = await startRun(request, { strategy: "redlock", stock: 100_000, workers: 2, ttlMs: 1000, workMs: 20, fault: { node: 1, kind: "kill", atMs: 6_000, forMs: 300 } });
  await expect.poll(async () => (await run(request, id)).fault?.endedAtMs ?? null, { timeout: 60_000 }).not.toBeNull();
  expect((await request.delete(`/api/demo/runs/${id}`, { headers: auth })).status()).toBe(200);
}

/**
 * Node `node` stopped (SIGSTOP) by a lab run, so the console sees it down or not answering, until `resume` cancels
 * the run (SIGCONT) and the console counts every node up again. `forMs` bounds the pause should a test never resume.
 */
export async function pauseNode(request: APIRequestContext, node: number, forMs = 60_000): Promise<{ resume: () => Promise<void> }> {
  const id = await startRun(request, { strategy: "redlock", stock: 100_000, workers: 2, ttlMs: 1000, workMs: 20, fault: { node, kind: "pause", atMs: 0, forMs } });
  await expect.poll(async () => (await run(request, id)).fault?.startedAtMs ?? null, { timeout: 30_000 }).not.toBeNull();
  return {
    resume: async () => {
      const cancelled = await request.delete(`/api/demo/runs/${id}`, { headers: auth });
      expect([200, 409], await cancelled.text()).toContain(cancelled.status());
      await expect.poll(async () => ((await (await request.get("/api/health")).json()) as { nodes: Array<{ up: boolean }> }).nodes.every((n) => n.up), { timeout: 60_000 }).toBe(true);
    },
  };
}

/**
 * Locks of every kind for the pages to show: engine holders with fences, a foreign value, a partial lock,
 * long names, and hot locks with waiters (the contention column). Returns a stop function.
 */
export async function busyLocks(nodes: Redis[]): Promise<{ hot: string; stop: () => Promise<void> }> {
  const prefix = `lock:orders-${randomBytes(2).toString("hex")}`;
  const labels = ["checkout-api", "billing-worker", "inventory-sync", "report-builder", "mailer"];
  const hosts = ["web-1", "web-2", "worker-3", "batch-7"];
  // One value per lock, the same on every node (a quorum), as a real holder writes it.
  const values = Array.from({ length: 24 }, (_, i) =>
    i % 5 === 4
      ? randomBytes(8).toString("hex")
      : encodeLockValue({ label: labels[i % labels.length]!, host: hosts[i % hosts.length]!, pid: 1000 + i * 37, fence: i % 3 === 0 ? String(1_000_000 + i * 7919) : null, acquiredAt: Date.now() - i * 61_000 }),
  );
  for (const node of nodes) {
    const pipeline = node.pipeline();
    values.forEach((value, i) => pipeline.set(`${prefix}/order-${String(40_000 + i * 13)}`, value, "PX", 3_600_000 - i * 60_000));
    pipeline.set(`${prefix}/settlement/very-long-resource-name-for-the-nightly-reconciliation-batch`, "foreign-client-token-7f3a", "PX", 3_600_000);
    await pipeline.exec();
  }
  // A Redlock whose vote is split: two values on two nodes, neither on a quorum.
  await nodes[0]!.set(`${prefix}/a-split-brain`, "only-on-node-0", "PX", 3_600_000);
  await nodes[1]!.set(`${prefix}/a-split-brain`, "only-on-node-1", "PX", 3_600_000);
  // Other libraries' locks: a Redisson lock held twice by one thread on one node, a redis-semaphore
  // semaphore with two permit holders, and a SETNX lock whose EXPIRE never came (no TTL).
  await nodes[0]!.hset(`${prefix}/a-redisson-invoice-run`, "6f1c2b9e-3d4a-4c1b-9e7f-2a5b8c0d1e3f:57", "2");
  await nodes[0]!.pexpire(`${prefix}/a-redisson-invoice-run`, 3_600_000);
  const semaphore = `semaphore:${prefix.slice("lock:".length)}-exports`;
  await nodes[1]!.zadd(semaphore, Date.now() - 4_000, "2d0f6a7e-worker-a", Date.now() - 1_000, "9b3e1c4d-worker-b");
  await nodes[1]!.pexpire(semaphore, 3_600_000);
  await nodes[2]!.set(`${prefix}/nightly-cleanup`, "crashed-before-expire");
  const holder = new Redlock(nodes, { label: "flash-sale", host: "web-1" });
  const hot = `${prefix}/a-hot-sku`;
  const held = await holder.acquire([hot], 3_600_000);
  const waiters = Array.from({ length: 3 }, (_, i) => new Redlock(nodes, { label: `buyer-${i}`, retryCount: 200, retryDelayMs: 250, retryJitterMs: 50 }));
  const attempts = waiters.map((w) => w.acquire([hot], 5_000).catch(() => null));
  return {
    hot,
    stop: async () => {
      await holder.release(held);
      await Promise.all(attempts.map((a) => a.then((lock) => lock?.release())));
      await Promise.all([holder, ...waiters].map((r) => r.quit()));
      await deleteMatching(nodes, `${prefix}/*`);
      await nodes[1]!.del(semaphore);
    },
  };
}

/** Deletes a test's own keys (SCAN MATCH, never KEYS) from every node. */
export async function deleteMatching(nodes: Redis[], match: string): Promise<void> {
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", match, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await node.del(...keys);
    } while (cursor !== "0");
  }
}

/**
 * Waits until the console lists no group matching `prefix`: the locks a test deleted are read as gone (and out of
 * the list), so that a later test's node restart cannot find them still held there and report them lost.
 */
export async function untilNoGroupMatches(request: APIRequestContext, prefix: string): Promise<void> {
  await expect
    .poll(async () => ((await (await request.get(`/api/locks/groups?q=${encodeURIComponent(prefix)}`, { headers: auth })).json()) as { total: number }).total, {
      timeout: 120_000,
      intervals: [500],
    })
    .toBe(0);
}

/** A lock held, then force-released by a script (bearer token, as with curl), so the audit log has an entry. */
export async function releasedByScript(request: APIRequestContext, nodes: Redis[], resource: string, actor: string, reason: string): Promise<void> {
  await holdLock(nodes, resource, "settlement-batch", "311");
  const response = await request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
    data: { reason },
    headers: { ...auth, "X-Lockscope-Actor": actor },
  });
  expect(response.status(), await response.text()).toBe(200);
}

/** Locks per group of a large fleet: 5,210 in all, above the 5,000 where the locks page groups them. */
export const FLEET = { orders: 450, billing: 120, mail: 40, bulk: 4_600 } as const;
const pad = (i: number) => String(i).padStart(4, "0");

/**
 * Holds every group's locks under `prefix` on every node (one value per lock, the same on each node, as a real
 * holder writes it); `orders/job-0007` is an hour-old nightly report.
 */
export async function holdFleet(nodes: Redis[], prefix: string): Promise<void> {
  const values = Object.entries(FLEET).flatMap(([group, count]) =>
    Array.from({ length: count }, (_, i) => ({
      key: `${prefix}-${group}/job-${pad(i)}`,
      value: encodeLockValue({ label: group === "orders" && i === 7 ? "nightly-report" : `${group}-worker`, host: `web-${i % 4}`, pid: 2000 + i, fence: null, acquiredAt: Date.now() - (group === "orders" && i === 7 ? 3_600_000 : i * 1_000) }),
    })),
  );
  for (const node of nodes) {
    const pipeline = node.pipeline();
    for (const { key, value } of values) pipeline.set(key, value, "PX", 600_000);
    await pipeline.exec();
  }
}

/**
 * Where an element's text wraps inside a word, as "exam|ple" (empty when it wraps only at spaces or after a
 * separator: "-", "_", ".", "@", ":", "/"). Read from where each character is drawn, across the element's text nodes.
 */
export async function midWordBreaks(element: Locator): Promise<string[]> {
  return element.evaluate((root) => {
    // Every character, with the top of the line it is drawn on (null for one drawn nowhere: a space at a line's end).
    const chars: Array<{ ch: string; top: number | null }> = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent ?? "";
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = [...range.getClientRects()].find((r) => r.width > 0);
        chars.push({ ch: text[i]!, top: rect ? Math.round(rect.top) : null });
      }
    }
    const all = chars.map((c) => c.ch).join("");
    const breaks: string[] = [];
    let last = -1;
    for (let i = 0; i < chars.length; i++) {
      const top = chars[i]!.top;
      if (top === null) continue;
      const before = last >= 0 ? chars[last]!.top : top;
      // A new line: fine after a separator or where a space (drawn or not) stands between the two characters.
      if (top !== before && !/[-_.@:/]/.test(chars[last]!.ch) && !/\s/.test(all.slice(last, i + 1))) {
        breaks.push(`${all.slice(Math.max(0, i - 12), i)}|${all.slice(i, i + 12)}`);
      }
      last = i;
    }
    return breaks;
  });
}

/**
 * Controls a finger cannot hit reliably on a phone: less than 44 × 44 px (Apple's and WCAG 2.5.5's size), as
 * sentences. A checkbox or radio counts with its label, which takes the tap too; a link inside a sentence is exempt
 * (WCAG's inline exception), as is a control a screen reader alone reaches (visually hidden).
 */
export async function smallTapTargets(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    const controls = document.querySelectorAll("a[href], button, select, textarea, input:not([type='hidden']), summary, [role='button']");
    for (const control of controls) {
      const target = control.matches("input[type='checkbox'], input[type='radio']") ? (control.closest("label") ?? control) : control;
      const r = target.getBoundingClientRect();
      const style = getComputedStyle(target);
      if (r.width <= 1 || r.height <= 1 || style.visibility === "hidden" || !target.checkVisibility() || target.closest(".sr-only, [aria-hidden='true']")) continue;
      if (control.tagName === "A") {
        const block = control.parentElement;
        const own = (control.textContent ?? "").trim();
        const around = (block?.textContent ?? "").trim();
        if (block && getComputedStyle(control).display === "inline" && around.length > own.length + 3 && !block.matches("td, th, li")) continue;
      }
      if (r.width < 43.5 || r.height < 43.5) {
        const name = (control.getAttribute("aria-label") ?? control.textContent ?? "").trim().replace(/\s+/g, " ").slice(0, 40) || control.tagName.toLowerCase();
        problems.push(`${control.tagName.toLowerCase()} "${name}" is ${Math.round(r.width)} × ${Math.round(r.height)} px`);
      }
    }
    return problems;
  });
}

/**
 * Table boxes that scroll sideways with no visible hint that they do (a phone shows no scroll bar until one scrolls):
 * each needs its "scroll sideways" hint on screen beside it.
 */
export async function unhintedScrollingTables(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll(".table-scroll, .locks-scroll")]
      // Not one in a closed <details>, which is not drawn (its hint comes when it opens).
      .filter((box) => box.checkVisibility() && box.scrollWidth > box.clientWidth + 1)
      .filter((box) => {
        const hint = box.parentElement?.querySelector(":scope > .scroll-hint");
        return !hint || hint.getBoundingClientRect().height === 0;
      })
      .map((box) => box.querySelector("table")?.getAttribute("aria-label") ?? "a table"),
  );
}
