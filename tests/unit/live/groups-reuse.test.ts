import { describe, expect, it } from "vitest";
import type { LockSummary } from "@/lib/locks/groups";
import type { Lock } from "@/lib/locks/types";
import { LockGroups, type GroupSource } from "@/server/live/groups";

/** A fleet whose every pass over the locks takes `passMs` (as a pass over a million locks takes seconds). */
function slowFleet(count: number, passMs: number) {
  const summaries: LockSummary[] = Array.from({ length: count }, (_, i) => ({
    resource: `lock:orders/${String(i).padStart(5, "0")}`,
    state: "held",
    acquiredAt: 1_000,
    expiresAt: 60_000,
    token: `t-${i}`,
    quorumHeld: 3,
    attemptsPerMin: null,
    waiters: null,
  }));
  const source = {
    passes: 0,
    async summariesInSlices(visit: (s: Readonly<LockSummary>) => void) {
      source.passes += 1;
      const until = performance.now() + passMs;
      while (performance.now() < until); // the pass's cost, on the event loop as the real one
      for (const s of summaries) visit(s);
      await Promise.resolve();
    },
    lock(resource: string): Lock | null {
      return { resource, format: "token", holders: [{ id: resource }], token: resource } as unknown as Lock;
    },
  } satisfies GroupSource & { passes: number };
  return source;
}

describe("the grouped view's sorted lists", () => {
  it("reuses a list for at least four times as long as it took to build, so a slow fleet is not passed over for every page", async () => {
    const fleet = slowFleet(1_000, 60);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { group: "orders", sort: "resource" as const, order: "asc" as const, offset: 0, limit: 50 };
    const t0 = 1_000_000;
    expect((await groups.page(query, t0)).locks).toHaveLength(50);
    expect(fleet.passes).toBe(1);
    // Pages a viewer scrolls to within the second after: the same list (a 60 ms pass is under REUSE_MS).
    await groups.page({ ...query, offset: 50 }, t0 + 500);
    await groups.page({ ...query, offset: 100 }, t0 + 900);
    expect(fleet.passes).toBe(1);
    // After the reuse window: built again.
    await groups.page({ ...query, offset: 150 }, t0 + 1_500);
    expect(fleet.passes).toBe(2);
  });

  it("stretches the reuse window with the cost of the pass", async () => {
    const fleet = slowFleet(1_000, 400);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { sort: "resource" as const, order: "asc" as const, offset: 0, limit: 50 };
    const t0 = 2_000_000;
    await groups.page(query, t0);
    // A 400 ms pass is reused for at least 1,600 ms after it ended (plus the pass itself), not 1,000 ms.
    await groups.page({ ...query, offset: 50 }, t0 + 1_800);
    expect(fleet.passes).toBe(1);
    await groups.page({ ...query, offset: 100 }, t0 + 10_000);
    expect(fleet.passes).toBe(2);
    // The groups' aggregate too.
    await groups.groups({ sort: "group", order: "asc", offset: 0, limit: 10 }, t0 + 10_000);
    await groups.groups({ sort: "group", order: "asc", offset: 0, limit: 10 }, t0 + 11_500);
    expect(fleet.passes).toBe(3);
  });

  it("shares one pass for the groups' rows among the requests that come while it runs, one per deployment asked", async () => {
    const fleet = slowFleet(1_000, 10);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { sort: "group" as const, order: "asc" as const, offset: 0, limit: 10 };
    const [first, second] = await Promise.all([groups.groups(query, 4_000_000), groups.groups({ ...query, q: "ord" }, 4_000_000)]);
    expect(fleet.passes).toBe(1);
    expect(first.groups).toEqual([expect.objectContaining({ group: "orders", locks: 1_000 })]);
    expect(second.total).toBe(1);
    // Another deployment's rows are another pass (none of these locks is on it).
    expect((await groups.groups({ ...query, deployment: "eu" }, 4_000_000)).locks).toBe(0);
    expect(fleet.passes).toBe(2);
  });

  it("keeps each deployment's rows apart: viewers of different deployments do not make every poll a pass", async () => {
    const fleet = slowFleet(1_000, 10);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { sort: "group" as const, order: "asc" as const, offset: 0, limit: 10 };
    const t0 = 5_000_000;
    // Within one reuse window, one viewer of every deployment and one of `eu` poll in turn.
    for (let i = 0; i < 5; i++) {
      await groups.groups(query, t0 + i * 100);
      await groups.groups({ ...query, deployment: "eu" }, t0 + i * 100 + 50);
    }
    expect(fleet.passes).toBe(2);
  });

  it("runs at most two passes at once, the other searches waiting their turn", async () => {
    const fleet = slowFleet(1_000, 5);
    let running = 0;
    let most = 0;
    const pass = fleet.summariesInSlices.bind(fleet);
    fleet.summariesInSlices = async (visit) => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 20));
      await pass(visit);
      running -= 1;
    };
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    // A script cycling through searches: every one is its own pass.
    const pages = await Promise.all(Array.from({ length: 8 }, (_, i) => groups.page({ q: `orders/0000${i}`, sort: "ttl", order: "asc", offset: 0, limit: 10 }, 6_000_000)));
    expect(pages.map((p) => p.total)).toEqual(Array.from({ length: 8 }, () => 1));
    expect(fleet.passes).toBe(8);
    expect(most).toBe(2);
  });

  it("reuses a list that waited its turn from when it was made, not from when it was asked for", async () => {
    const fleet = slowFleet(1_000, 0);
    const pass = fleet.summariesInSlices.bind(fleet);
    // The first two passes (two other viewers' searches) hold the console's two places until let go.
    const held: Array<() => void> = [];
    fleet.summariesInSlices = async (visit) => {
      if (held.length < 2) await new Promise<void>((resolve) => held.push(resolve));
      await pass(visit);
    };
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const t0 = 9_000_000;
    const others = [groups.page({ q: "orders/1", sort: "ttl", order: "asc", offset: 0, limit: 10 }, t0), groups.page({ q: "orders/2", sort: "ttl", order: "asc", offset: 0, limit: 10 }, t0)];
    const query = { group: "orders", sort: "ttl" as const, order: "asc" as const, offset: 0, limit: 50 };
    const waiting = groups.page(query, t0);
    // They take a second and a half; this list waits its turn meanwhile, then is made at once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const release of held) release();
    await Promise.all([...others, waiting]);
    expect(fleet.passes).toBe(3);
    // The viewer scrolls to the next page just after it came: the list made a moment ago serves it.
    await groups.page({ ...query, offset: 50 }, t0 + 1_600);
    expect(fleet.passes).toBe(3);
  });

  it("shares one build among the requests that come while it runs", async () => {
    const fleet = slowFleet(1_000, 10);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { group: "orders", sort: "resource" as const, order: "asc" as const, offset: 0, limit: 50 };
    const [first, second] = await Promise.all([groups.page(query, 3_000_000), groups.page({ ...query, offset: 50 }, 3_000_000)]);
    expect(fleet.passes).toBe(1);
    expect(first.total).toBe(1_000);
    expect(second.locks[0]?.resource).toBe("lock:orders/00050");
  });
});

/** A fleet that tells of locks joining and leaving its list, as the lock store does. */
function tellingFleet(names: string[]) {
  const listed = new Set(names);
  let listener: ((resource: string, listed: boolean) => void) | null = null;
  const summary = (resource: string): LockSummary => ({ resource, state: "held", acquiredAt: 1_000, expiresAt: 60_000, token: `t-${resource}`, quorumHeld: 3, attemptsPerMin: null, waiters: null });
  const fleet = {
    passes: 0,
    /** Runs in the middle of the next pass (after half the locks were visited). */
    duringPass: null as (() => void) | null,
    async summariesInSlices(visit: (s: Readonly<LockSummary>) => void) {
      fleet.passes += 1;
      const all = [...listed];
      all.slice(0, all.length / 2).forEach((r) => visit(summary(r)));
      await Promise.resolve();
      fleet.duringPass?.();
      fleet.duringPass = null;
      // Locks are visited as they are when their slice comes.
      all.slice(all.length / 2).filter((r) => listed.has(r)).forEach((r) => visit(summary(r)));
    },
    lock(resource: string): Lock | null {
      return listed.has(resource) ? ({ resource } as unknown as Lock) : null;
    },
    join(resource: string) {
      listed.add(resource);
      listener?.(resource, true);
    },
    leave(resource: string) {
      listed.delete(resource);
      listener?.(resource, false);
    },
    subscribe(l: (resource: string, listed: boolean) => void) {
      listener = l;
    },
  };
  return fleet;
}

describe("a group paged by name", () => {
  const names = (page: { locks: Lock[] }) => page.locks.map((l) => l.resource);

  it("is passed over once, then kept in order as locks come and go: every page is current, however long the viewer scrolls", async () => {
    const fleet = tellingFleet(Array.from({ length: 3_000 }, (_, i) => `lock:orders/${String(i).padStart(4, "0")}`).concat(["lock:users/1"]));
    const groups = new LockGroups(fleet, /^lock:([^/]+)/, (l) => fleet.subscribe(l));
    const query = { group: "orders", sort: "resource" as const, order: "asc" as const, offset: 0, limit: 3 };
    const t0 = 5_000_000;
    const first = await groups.page(query, t0);
    expect(names(first)).toEqual(["lock:orders/0000", "lock:orders/0001", "lock:orders/0002"]);
    expect(first.total).toBe(3_000);
    fleet.join("lock:orders/0000a");
    fleet.leave("lock:orders/0001");
    fleet.join("lock:users/2");
    // At once, not after a reuse window.
    const next = await groups.page(query, t0 + 10);
    expect(names(next)).toEqual(["lock:orders/0000", "lock:orders/0000a", "lock:orders/0002"]);
    expect(next.total).toBe(3_000);
    const last = await groups.page({ ...query, order: "desc" }, t0 + 60_000);
    expect(names(last)).toEqual(["lock:orders/2999", "lock:orders/2998", "lock:orders/2997"]);
    expect(names(await groups.page({ ...query, offset: 2_998 }, t0 + 120_000))).toEqual(["lock:orders/2998", "lock:orders/2999"]);
    expect(fleet.passes).toBe(1);
    // Another sort is a list as before (a pass, reused for its window).
    await groups.page({ ...query, sort: "heldFor" }, t0 + 120_000);
    expect(fleet.passes).toBe(2);
  });

  it("serves a page near its start while its order is still being sorted: the page the order gives, with what changed meanwhile", async () => {
    // 60,000 names in no order: sorted in slices of 20,000, the event loop free between them.
    const padded = (i: number) => `lock:orders/${String(i).padStart(5, "0")}`;
    const fleet = tellingFleet(Array.from({ length: 60_000 }, (_, i) => padded((i * 7_919) % 60_000)));
    const groups = new LockGroups(fleet, /^lock:([^/]+)/, (l) => fleet.subscribe(l));
    const query = { group: "orders", sort: "resource" as const, order: "asc" as const, offset: 0, limit: 3 };
    const t0 = 5_500_000;
    let sorted = false;
    // A page deep in the group waits for the whole order.
    const deep = groups.page({ ...query, offset: 50_000 }, t0).then((page) => {
      sorted = true;
      return page;
    });
    const first = await groups.page(query, t0);
    expect(sorted).toBe(false);
    expect(names(first)).toEqual([padded(0), padded(1), padded(2)]);
    expect(first.total).toBe(60_000);
    expect(first.next).not.toBeNull();
    fleet.leave(padded(1));
    fleet.join(`${padded(0)}a`);
    const again = await groups.page(query, t0 + 1);
    const last = await groups.page({ ...query, order: "desc", offset: 1 }, t0 + 2);
    expect(sorted).toBe(false);
    expect(names(again)).toEqual([padded(0), `${padded(0)}a`, padded(2)]);
    expect(again.total).toBe(60_000);
    expect(names(last)).toEqual([padded(59_998), padded(59_997), padded(59_996)]);
    // Sorted, the order gives the same pages.
    expect(names(await deep)).toEqual([padded(50_000), padded(50_001), padded(50_002)]);
    expect(names(await groups.page(query, t0 + 3))).toEqual(names(again));
    expect(names(await groups.page({ ...query, order: "desc", offset: 1 }, t0 + 4))).toEqual(names(last));
    expect(fleet.passes).toBe(1);
  });

  it("counts what changes while its first pass runs, whether the pass had reached the lock or not", async () => {
    const fleet = tellingFleet(["lock:jobs/a", "lock:jobs/b", "lock:jobs/c", "lock:jobs/d"]);
    const groups = new LockGroups(fleet, /^lock:([^/]+)/, (l) => fleet.subscribe(l));
    fleet.duringPass = () => {
      fleet.leave("lock:jobs/a"); // visited already
      fleet.leave("lock:jobs/d"); // not yet
      fleet.join("lock:jobs/b2");
      fleet.join("lock:other/x");
    };
    const page = await groups.page({ group: "jobs", sort: "resource", order: "asc", offset: 0, limit: 10 }, 6_000_000);
    expect(names(page)).toEqual(["lock:jobs/b", "lock:jobs/b2", "lock:jobs/c"]);
    expect(page.total).toBe(3);
  });

  describe("where the pattern makes a group of nearly every lock (keys such as lock:job-42)", () => {
    /** `count` locks, each its own group under the default pattern; `lock` counts the locks built. */
    function oneGroupPerLock(count: number) {
      const summaries: LockSummary[] = Array.from({ length: count }, (_, i) => ({
        resource: `lock:job-${String(i).padStart(6, "0")}`,
        state: "held",
        acquiredAt: 1_000 + i,
        expiresAt: 60_000,
        token: `t-${i}`,
        quorumHeld: 3 - (i % 2),
        attemptsPerMin: null,
        waiters: null,
      }));
      const source = {
        built: 0,
        async summariesInSlices(visit: (s: Readonly<LockSummary>) => void) {
          for (const s of summaries) visit(s);
          await Promise.resolve();
        },
        lock(resource: string): Lock | null {
          source.built += 1;
          return { resource, format: "token", redisType: "string", holders: [{ id: `holder-of-${resource}` }], token: resource } as unknown as Lock;
        },
      } satisfies GroupSource & { built: number };
      return source;
    }

    it("names the oldest holder of the groups served only, not of every group", async () => {
      const fleet = oneGroupPerLock(5_000);
      const groups = new LockGroups(fleet, /^([^:]+:[^:/]+)/);
      const query = { sort: "oldest" as const, order: "desc" as const, offset: 0, limit: 10 };
      const page = await groups.groups(query, 7_000_000);
      expect(page.total).toBe(5_000);
      expect(page.groups.map((g) => g.oldest?.holder)).toEqual(Array.from({ length: 10 }, (_, i) => `raw holder-of-lock:job-${String(i).padStart(6, "0")}`));
      expect(fleet.built).toBe(10);
      // The same rows polled again while they are reused: named already.
      await groups.groups(query, 7_000_500);
      expect(fleet.built).toBe(10);
    });

    it("lets other work run while it sorts the groups", async () => {
      const fleet = oneGroupPerLock(60_000);
      const groups = new LockGroups(fleet, /^([^:]+:[^:/]+)/);
      const t0 = 8_000_000;
      await groups.groups({ sort: "group", order: "asc", offset: 0, limit: 10 }, t0);
      let ticks = 0;
      const timer = setInterval(() => (ticks += 1), 0);
      const byPartial = await groups.groups({ sort: "partial", order: "desc", offset: 0, limit: 3 }, t0 + 100);
      clearInterval(timer);
      expect(byPartial.groups.map((g) => g.group)).toEqual(["lock:job-000000", "lock:job-000001", "lock:job-000002"]);
      expect(ticks).toBeGreaterThan(0);
    });
  });
});

describe("a reused sorted list", () => {
  it("serves a full first page when locks on it left the list since it was made", async () => {
    const names = Array.from({ length: 30 }, (_, i) => `lock:orders/${String(i).padStart(2, "0")}`);
    const fleet = tellingFleet(names);
    // Sorted by TTL: a list made by a pass, reused for its window (not kept in order as locks come and go).
    const groups = new LockGroups(fleet, /^lock:([^/]+)/);
    const query = { group: "orders", sort: "ttl" as const, order: "asc" as const, offset: 0, limit: 10 };
    const t0 = 7_000_000;
    expect((await groups.page(query, t0)).locks).toHaveLength(10);
    fleet.leave("lock:orders/02");
    fleet.leave("lock:orders/05");
    // Within the reuse window: the same list, whose rows are read live.
    const again = await groups.page(query, t0 + 500);
    expect(fleet.passes).toBe(1);
    expect(again.locks.map((l) => l.resource)).toEqual(names.filter((n) => n !== "lock:orders/02" && n !== "lock:orders/05").slice(0, 10));
  });
});
