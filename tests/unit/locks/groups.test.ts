import { describe, expect, it } from "vitest";
import { byFence as fenceOrder, GROUP_ROWS_WINDOW, GroupAggregator, LockColumns, lockGroup, matchesSearch, OTHER_GROUP, rowsWindow, sortGroups, sortInSlices, statelessPattern, type LockSummary } from "@/lib/locks/groups";

const PATTERN = /^([^:]+:[^:/]+)/;
const summary = (resource: string, fields: Partial<LockSummary> = {}): LockSummary => ({
  resource,
  state: "held",
  acquiredAt: 1_000,
  expiresAt: 60_000,
  token: `token-of-${resource}`,
  quorumHeld: 3,
  attemptsPerMin: null,
  waiters: null,
  ...fields,
});
const readers = { holder: (s: LockSummary) => s.token ?? "", fence: (): string | null => null };

describe("lock groups", () => {
  it("names a key's group by the pattern's first capture, or other", () => {
    expect(lockGroup(PATTERN, "lock:orders/42")).toBe("lock:orders");
    expect(lockGroup(PATTERN, "mutex:jobs")).toBe("mutex:jobs");
    expect(lockGroup(PATTERN, "lock")).toBe(OTHER_GROUP);
    expect(lockGroup(/^(x)?/, "lock:a")).toBe(OTHER_GROUP);
    expect(lockGroup(/^(.*)$/, `lock:${"a".repeat(80)}`)).toBe(OTHER_GROUP);
    // A global pattern would remember where it stopped and miss every other key.
    const stateless = statelessPattern(/^([^:]+:[^:/]+)/g);
    expect([lockGroup(stateless, "lock:a/1"), lockGroup(stateless, "lock:a/2")]).toEqual(["lock:a", "lock:a"]);
  });

  it("counts states, sums known contention and finds the oldest and the soonest to expire", () => {
    const agg = new GroupAggregator((r) => lockGroup(PATTERN, r));
    agg.add(summary("lock:orders/1", { acquiredAt: 500, expiresAt: 90_000 }));
    agg.add(summary("lock:orders/2", { state: "partial", acquiredAt: 800, expiresAt: 30_000, attemptsPerMin: 4, waiters: 1 }));
    agg.add(summary("lock:orders/3", { state: "released", acquiredAt: 10, expiresAt: 1 }));
    agg.add(summary("lock:orders/4", { state: "elapsed", expiresAt: null }));
    agg.add(summary("lock:mail/1", {}));
    const rows = sortGroups(agg.rows(), "group", "asc");
    expect(rows.map((g) => g.group)).toEqual(["lock:mail", "lock:orders"]);
    expect(rows[1]).toEqual({
      group: "lock:orders",
      locks: 4,
      held: 1,
      partial: 1,
      elapsed: 1,
      ended: 1,
      contention: { attemptsPerMin: 4, waiters: 1 },
      oldest: { resource: "lock:orders/1", acquiredAt: 500, holder: null },
      shortestTtl: { resource: "lock:orders/2", expiresAt: 30_000 },
    });
    // Contention nobody can see stays unknown, never 0.
    expect(rows[0]?.contention).toEqual({ attemptsPerMin: null, waiters: null });
    expect(sortGroups(rows, "contention", "desc").map((g) => g.group)).toEqual(["lock:orders", "lock:mail"]);
    expect(sortGroups(rows, "contention", "asc").map((g) => g.group)).toEqual(["lock:orders", "lock:mail"]);
    expect(sortGroups(rows, "locks", "desc").map((g) => g.group)).toEqual(["lock:orders", "lock:mail"]);
  });

  it("sorts by the oldest holder as its column reads (how long it has held): ascending is the shortest-held first", () => {
    const agg = new GroupAggregator((r) => lockGroup(PATTERN, r));
    agg.add(summary("lock:hour/1", { acquiredAt: 1_000 }));
    agg.add(summary("lock:minute/1", { acquiredAt: 3_540_000 }));
    agg.add(summary("lock:day/1", { acquiredAt: 0 }));
    // A group whose locks all ended has no oldest holder: last either way.
    agg.add(summary("lock:gone/1", { state: "released" }));
    // Held for, as the row shows it at 3,600,000: a day's group 1 h 0 min, an hour's 59 min 59 s, a minute's 1 min 0 s.
    expect(sortGroups(agg.rows(), "oldest", "asc").map((g) => g.group)).toEqual(["lock:minute", "lock:hour", "lock:day", "lock:gone"]);
    expect(sortGroups(agg.rows(), "oldest", "desc").map((g) => g.group)).toEqual(["lock:day", "lock:hour", "lock:minute", "lock:gone"]);
  });

  it("sorts locks by a column, ties and unknowns last, and searches resource and holder", () => {
    const rows = [
      summary("lock:b", { expiresAt: 5_000, acquiredAt: 100 }),
      summary("lock:a", { expiresAt: null, acquiredAt: 300 }),
      summary("lock:c", { expiresAt: 2_000, acquiredAt: 200, token: "lk1:x:y:1::web-2:nightly-report" }),
    ];
    const names = (key: ConstructorParameters<typeof LockColumns>[0], order: "asc" | "desc", of = rows) => {
      const columns = new LockColumns(key, readers);
      for (const row of of) columns.add(row);
      return columns
        .rows()
        .sort(columns.compare(order))
        .map((i) => columns.resources[i]);
    };
    expect(names("resource", "desc")).toEqual(["lock:c", "lock:b", "lock:a"]);
    expect(names("ttl", "asc")).toEqual(["lock:c", "lock:b", "lock:a"]);
    expect(names("ttl", "desc")).toEqual(["lock:b", "lock:c", "lock:a"]);
    expect(names("heldFor", "desc")).toEqual(["lock:b", "lock:c", "lock:a"]);
    expect(names("heldFor", "asc")).toEqual(["lock:a", "lock:c", "lock:b"]);
    expect(names("state", "asc")).toEqual(["lock:a", "lock:b", "lock:c"]);
    expect(names("holder", "asc")).toEqual(["lock:c", "lock:a", "lock:b"]);
    expect(names("holder", "desc")).toEqual(["lock:b", "lock:a", "lock:c"]);
    // Equal figures fall back to the resource, ascending, in either order.
    expect(names("nodes", "desc")).toEqual(["lock:a", "lock:b", "lock:c"]);
    const busy = [summary("lock:b", { attemptsPerMin: 5 }), summary("lock:a", { attemptsPerMin: null }), summary("lock:c", { attemptsPerMin: 2 }), summary("lock:d", { attemptsPerMin: 2 })];
    expect(names("contention", "desc", busy)).toEqual(["lock:b", "lock:c", "lock:d", "lock:a"]);
    expect(names("contention", "asc", busy)).toEqual(["lock:c", "lock:d", "lock:b", "lock:a"]);
    // Fences past 2^53 (Redis counts to 2^63) are told apart as the numbers they are.
    const fenced = [
      summary("lock:x", { token: "7" }),
      summary("lock:y", { token: null }),
      summary("lock:z", { token: "12" }),
      summary("lock:big2", { token: "9007199254740993" }),
      summary("lock:big1", { token: "9007199254740992" }),
    ];
    const fenceReaders = { holder: readers.holder, fence: (s: LockSummary) => s.token };
    const byFence = (order: "asc" | "desc") => {
      const columns = new LockColumns("fence", fenceReaders);
      for (const row of fenced) columns.add(row);
      return columns
        .rows()
        .sort(columns.compare(order))
        .map((i) => columns.resources[i]);
    };
    expect(fenceOrder("9007199254740993", "9007199254740992")).toBeGreaterThan(0);
    expect(fenceOrder("12", "7")).toBeGreaterThan(0);
    expect(fenceOrder("007", "7")).toBe(0);
    expect(byFence("asc")).toEqual(["lock:x", "lock:z", "lock:big1", "lock:big2", "lock:y"]);
    expect(byFence("desc")).toEqual(["lock:big2", "lock:big1", "lock:z", "lock:x", "lock:y"]);
    const asHeld = (s: LockSummary) => s.token ?? "";
    expect(rows.filter((r) => matchesSearch(r, "nightly", asHeld)).map((r) => r.resource)).toEqual(["lock:c"]);
    expect(rows.filter((r) => matchesSearch(r, "lock:a", asHeld)).map((r) => r.resource)).toEqual(["lock:a"]);
    // The holder as read from the value, not the value: a search for what the value alone holds finds nothing.
    const shown = (s: LockSummary) => (s.token?.includes("nightly") ? "report (batch-7 pid 42)" : "—");
    expect(rows.filter((r) => matchesSearch(r, "batch-7", shown)).map((r) => r.resource)).toEqual(["lock:c"]);
    expect(rows.filter((r) => matchesSearch(r, "nightly", shown)).map((r) => r.resource)).toEqual([]);
  });
});

describe("sortInSlices", () => {
  it("gives what one stable sort gives, for a list longer than a run, ties included", async () => {
    // 100,003 rows with many ties on the key: the merge must keep equal keys in their first order.
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    const rows = Array.from({ length: 100_003 }, (_, i) => ({ key: Math.floor(random() * 500), i }));
    const byKey = (a: { key: number }, b: { key: number }) => a.key - b.key;
    const expected = [...rows].sort(byKey);
    const sorted = await sortInSlices(rows, byKey);
    expect(sorted).toBe(rows);
    expect(sorted.map((r) => r.i)).toEqual(expected.map((r) => r.i));
  });

  it("lets other work run while it sorts", async () => {
    const rows = Array.from({ length: 200_000 }, (_, i) => (i * 7_919) % 200_000);
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 0);
    const sorted = await sortInSlices(rows, (a, b) => a - b);
    clearInterval(timer);
    expect(sorted.every((v, i) => v === i)).toBe(true);
    expect(ticks).toBeGreaterThan(0);
  });
});

describe("rowsWindow", () => {
  it("shows a large group a range of rows at a time, the last range as long as what is left", () => {
    expect(GROUP_ROWS_WINDOW * 38).toBeLessThan(33_554_431); // (a browser lays out no taller table than this, in px)
    expect(rowsWindow(1_000_000, 0)).toEqual({ start: 0, count: 100_000 });
    expect(rowsWindow(1_000_000, 900_000)).toEqual({ start: 900_000, count: 100_000 });
    expect(rowsWindow(950_001, 900_000)).toEqual({ start: 900_000, count: 50_001 });
    expect(rowsWindow(450, 0)).toEqual({ start: 0, count: 450 });
  });

  it("starts a range on a multiple of its size and moves back when the group shrank below it", () => {
    expect(rowsWindow(1_000_000, 150_000)).toEqual({ start: 100_000, count: 100_000 });
    expect(rowsWindow(850_000, 900_000)).toEqual({ start: 800_000, count: 50_000 });
    expect(rowsWindow(100_000, 100_000)).toEqual({ start: 0, count: 100_000 });
    expect(rowsWindow(0, 200_000)).toEqual({ start: 0, count: 0 });
    expect(rowsWindow(25, -10, 10)).toEqual({ start: 0, count: 10 });
  });
});
