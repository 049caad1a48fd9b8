/**
 * The browser tab of `bench/live.ts -- --browser`: a headless Chromium (Debian's, as the end-to-end tests use)
 * signed in as a viewer on the Locks page while the churn runs, its table scrolled all along. What it reports
 * is what a person at that tab would feel: the page's JavaScript heap (the most it used, from the DevTools
 * protocol), its long tasks (PerformanceObserver "longtask": main-thread work of 50 ms or more, during which
 * the page does not answer), the time between its frames (requestAnimationFrame) and the CPU Chromium used.
 *
 * The view is the one a person gets: the flat table up to 5,000 locks; above, the grouped view, from which
 * the tab opens the largest group (its server-paged, virtualized table) and scrolls that.
 */
import { writeFileSync } from "node:fs";
import { chromium, type Browser, type CDPSession, type Page } from "@playwright/test";
import { GROUPED_VIEW_ABOVE } from "../lib/locks/groups";
import { processes } from "./support";

export interface TabFigures {
  /** What the tab showed: "table" or "group <name>". */
  view: string;
  heapMaxMb: number;
  longTasks: number;
  longTaskMaxMs: number;
  frameP99Ms: number;
  frameMaxMs: number;
  /** The CPU all of Chromium's processes used over the window, in % of one core (/proc, utime + stime). */
  cpuPct: number;
}

/** CPU ticks (1/100 s) used so far by the Chromium processes this process started (its descendants named chrom…). */
function chromiumTicks(): number {
  const all = processes();
  const parent = new Map(all.map((p) => [p.pid, Number(p.fields[1])]));
  let total = 0;
  for (const { pid, name, fields } of all) {
    if (!/chrom/i.test(name)) continue;
    for (let up = parent.get(pid); up !== undefined && up > 1; up = parent.get(up)) {
      if (up === process.pid) {
        total += Number(fields[11]) + Number(fields[12]);
        break;
      }
    }
  }
  return total;
}

/** Collects long tasks and frame intervals in the page from its first script on. */
const INSTRUMENT = `
window.__bench = { longTasks: [], frames: [] };
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__bench.longTasks.push(e.duration); }).observe({ type: "longtask", buffered: true });
(() => { let last = performance.now(); const frame = (t) => { window.__bench.frames.push(t - last); last = t; requestAnimationFrame(frame); }; requestAnimationFrame(frame); })();
`;

export class BrowserTab {
  private scrolling: NodeJS.Timeout | null = null;
  private heapSampler: NodeJS.Timeout | null = null;
  private heapMax = 0;
  private wheels = 0;
  private cpuFrom = { ticks: 0, at: 0 };
  /**
   * Set by `begin(profileTo)`: the measured window's CPU profile of the page is written to that path
   * (`.cpuprofile`, DevTools' format), and its trace (`.trace.json`: tasks, style, layout and paint) beside it.
   */
  private profileTo: string | null = null;

  private constructor(
    private readonly browser: Browser,
    private readonly page: Page,
    private readonly cdp: CDPSession,
    readonly view: string,
    /** From the tab's navigation to its first row of a lock (ms). */
    readonly firstRowMs: number,
  ) {}

  static async open(port: number, viewerToken: string, held: number): Promise<BrowserTab> {
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
    try {
      const origin = `http://127.0.0.1:${port}`;
      const page = await browser.newPage({ baseURL: origin, viewport: { width: 1280, height: 900 } });
      await page.addInitScript(INSTRUMENT);
      const signIn = await page.request.post("/api/session", { data: { token: viewerToken, name: "bench" }, headers: { Origin: origin } });
      if (signIn.status() !== 200) throw new Error(`sign-in answered ${signIn.status()}`);
      let group: string | null = null;
      if (held > GROUPED_VIEW_ABOVE) {
        const groups = (await (await page.request.get("/api/locks/groups?sort=locks&order=desc&limit=1")).json()) as { groups: Array<{ group: string }> };
        group = groups.groups[0]?.group ?? null;
        if (group === null) throw new Error("the grouped view lists no group");
      }
      const navigated = performance.now();
      await page.goto(group === null ? "/" : `/?group=${encodeURIComponent(group)}`);
      // A row of a held lock, not the table's "Loading locks…" row: opening a group of a million locks sorts their
      // names on the console (seconds of its CPU on a slow machine), which is the tab's opening, not its scrolling.
      await page.locator("table tbody tr").filter({ hasText: "lock:held:" }).first().waitFor({ timeout: 120_000 });
      const cdp = await page.context().newCDPSession(page);
      return new BrowserTab(browser, page, cdp, group === null ? "table" : `group ${group}`, performance.now() - navigated);
    } catch (error) {
      await browser.close();
      throw error;
    }
  }

  /**
   * Starts scrolling the tab's table (down, and back up now and then), as during the churn's unmeasured
   * warm-up, so the measured window sees a tab that has been scrolling, not its first scroll.
   */
  async scroll(): Promise<void> {
    if (this.scrolling) return;
    const box = await this.page.locator("table tbody").first().boundingBox();
    await this.page.mouse.move((box?.x ?? 400) + 200, (box?.y ?? 300) + 100);
    this.scrolling = setInterval(() => {
      this.wheels += 1;
      void this.page.mouse.wheel(0, this.wheels % 40 === 0 ? -12_000 : 300).catch(() => undefined);
    }, 100);
  }

  /** Starts a measured window: the tab's table scrolls while it lasts. */
  async begin(profileTo: string | null = null): Promise<void> {
    this.profileTo = profileTo;
    if (profileTo) {
      await this.cdp.send("Profiler.enable");
      await this.cdp.send("Profiler.start");
      await this.browser.startTracing(this.page, { categories: ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing"] });
    }
    await this.page.evaluate(() => {
      const bench = (window as unknown as { __bench: { longTasks: number[]; frames: number[] } }).__bench;
      bench.longTasks.length = 0;
      bench.frames.length = 0;
    });
    this.heapMax = 0;
    this.cpuFrom = { ticks: chromiumTicks(), at: performance.now() };
    await this.scroll();
    this.heapSampler = setInterval(() => {
      void this.cdp
        .send("Runtime.getHeapUsage")
        .then((usage) => (this.heapMax = Math.max(this.heapMax, usage.usedSize)))
        .catch(() => undefined);
    }, 250);
  }

  /** Ends the window and says what the tab went through. */
  async end(): Promise<TabFigures> {
    if (this.scrolling) clearInterval(this.scrolling);
    this.scrolling = null;
    if (this.heapSampler) clearInterval(this.heapSampler);
    const cpuPct = ((chromiumTicks() - this.cpuFrom.ticks) / 100 / ((performance.now() - this.cpuFrom.at) / 1000)) * 100;
    if (this.profileTo) {
      const { profile } = await this.cdp.send("Profiler.stop");
      writeFileSync(this.profileTo, JSON.stringify(profile));
      writeFileSync(this.profileTo.replace(/\.cpuprofile$/, ".trace.json"), await this.browser.stopTracing());
      this.profileTo = null;
    }
    const usage = await this.cdp.send("Runtime.getHeapUsage");
    this.heapMax = Math.max(this.heapMax, usage.usedSize);
    const { longTasks, frames } = await this.page.evaluate(() => (window as unknown as { __bench: { longTasks: number[]; frames: number[] } }).__bench);
    const sorted = [...frames].sort((a, b) => a - b);
    return {
      view: this.view,
      heapMaxMb: this.heapMax / 1024 / 1024,
      longTasks: longTasks.length,
      longTaskMaxMs: longTasks.length > 0 ? Math.max(...longTasks) : 0,
      frameP99Ms: sorted.length > 0 ? (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? Number.NaN) : Number.NaN,
      frameMaxMs: sorted.length > 0 ? (sorted[sorted.length - 1] ?? Number.NaN) : Number.NaN,
      cpuPct,
    };
  }

  async close(): Promise<void> {
    if (this.scrolling) clearInterval(this.scrolling);
    if (this.heapSampler) clearInterval(this.heapSampler);
    await this.browser.close();
  }
}
