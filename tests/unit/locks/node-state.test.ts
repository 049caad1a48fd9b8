import { describe, expect, it } from "vitest";
import { INITIAL_RUN_FACTS, nextAnswering, nextNotificationStatus, nextRunFacts, restartRisk } from "@/lib/locks/node-state";

const T = 1_800_000_000_000;

describe("restarts of a lock node", () => {
  it("takes a changed run id for a restart, and the first reading for none", () => {
    const first = nextRunFacts(INITIAL_RUN_FACTS, { runId: "aaa", uptimeSec: 3_600 }, T);
    expect(first.restarted).toBe(false);
    expect(first.facts.restartedAt).toBeNull();
    const same = nextRunFacts(first.facts, { runId: "aaa", uptimeSec: 3_605 }, T + 5_000);
    expect(same).toMatchObject({ restarted: false, replaced: false });
    // A restart that left no trace in the keys (the node was empty) is still a new run id.
    const again = nextRunFacts(same.facts, { runId: "bbb", uptimeSec: 2 }, T + 10_000);
    expect(again).toMatchObject({ restarted: true, facts: { runId: "bbb", restartedAt: T + 8_000 } });
  });

  it("takes another run id of a server that was already running (a Sentinel failover's new primary) for no restart", () => {
    const before = nextRunFacts(INITIAL_RUN_FACTS, { runId: "aaa", uptimeSec: 3_600 }, T).facts;
    // The promoted replica has been up for a day.
    const promoted = nextRunFacts(before, { runId: "ccc", uptimeSec: 86_400 }, T + 12_000);
    expect(promoted).toMatchObject({ restarted: false, replaced: true, facts: { runId: "ccc", restartedAt: null } });
    // A restart of it later is one.
    const restarted = nextRunFacts(promoted.facts, { runId: "ddd", uptimeSec: 0 }, T + 60_000);
    expect(restarted).toMatchObject({ restarted: true, replaced: false, facts: { restartedAt: T + 60_000 } });
  });

  it("flags a risk while a node without persistence has been up for less than the longest TTL", () => {
    const facts = nextRunFacts(nextRunFacts(INITIAL_RUN_FACTS, { runId: "aaa", uptimeSec: 100 }, T).facts, { runId: "bbb", uptimeSec: 1 }, T + 1_000).facts;
    expect(restartRisk(facts, false, 20_000, T + 1_000)).toBe(true);
    expect(restartRisk(facts, false, 20_000, T + 25_000)).toBe(false);
    expect(restartRisk(facts, true, 20_000, T + 1_000)).toBe(false);
    // Up for less than the TTL, but the console never saw it restart: it may simply be new.
    const fresh = nextRunFacts(INITIAL_RUN_FACTS, { runId: "ccc", uptimeSec: 1 }, T).facts;
    expect(restartRisk(fresh, false, 20_000, T + 1_000)).toBe(false);
    // ...no lock held now is older than the node (started 1 s before T)...
    expect(restartRisk(fresh, false, 20_000, T + 1_000, T + 500)).toBe(false);
    // ...but one is: the node started during its life (restarted while no console watched, or with it).
    expect(restartRisk(fresh, false, 20_000, T + 1_000, T - 5_000)).toBe(true);
    expect(restartRisk(fresh, true, 20_000, T + 1_000, T - 5_000)).toBe(false);
    expect(restartRisk(fresh, false, 20_000, T + 25_000, T - 5_000)).toBe(false);
  });

  it("does not take a lock acquired in the node's first second for one older than the node (uptime is whole seconds)", () => {
    // Read as up 2 s at T: it started after T - 3 s and by T - 2 s.
    const fresh = nextRunFacts(INITIAL_RUN_FACTS, { runId: "ddd", uptimeSec: 2 }, T).facts;
    // A lock acquired at T - 2.3 s may be younger than the node (started at T - 2.9 s, say): no hazard claimed.
    expect(restartRisk(fresh, false, 60_000, T + 100, T - 2_300)).toBe(false);
    // One acquired before T - 3 s is older than the node whatever the fraction.
    expect(restartRisk(fresh, false, 60_000, T + 100, T - 3_100)).toBe(true);
  });
});

describe("a node that does not answer", () => {
  const D = 500;
  it("stops answering when a command waits past the deadline, and answers again only after a success", () => {
    let state = { answering: true, since: T };
    state = nextAnswering(state, { oldestWaitingSince: T, lastAnswerAt: null }, T + 400, D);
    expect(state.answering).toBe(true);
    state = nextAnswering(state, { oldestWaitingSince: T, lastAnswerAt: null }, T + 501, D);
    expect(state).toEqual({ answering: false, since: T + 501 });
    // The command timed out: nothing waits any more, yet nothing answered either.
    state = nextAnswering(state, { oldestWaitingSince: null, lastAnswerAt: T - 100 }, T + 5_000, D);
    expect(state.answering).toBe(false);
    state = nextAnswering(state, { oldestWaitingSince: null, lastAnswerAt: T + 6_000 }, T + 6_000, D);
    expect(state.answering).toBe(true);
  });
});

describe("keyspace notifications checked again", () => {
  it("re-enables flags switched off at runtime and says events were lost", () => {
    const on = nextNotificationStatus({ status: "on", enabledByConsole: false, checked: false }, { refused: false, missing: "", setOk: true });
    expect(on).toEqual({ status: "on", enabledByConsole: false, lost: false });
    const off = nextNotificationStatus({ ...on, checked: true }, { refused: false, missing: "Kg$xe", setOk: true });
    expect(off).toEqual({ status: "enabled-by-console", enabledByConsole: true, lost: true });
  });

  it("degrades to unavailable where the flags cannot be set back", () => {
    const next = nextNotificationStatus({ status: "on", enabledByConsole: false, checked: true }, { refused: false, missing: "K", setOk: false });
    expect(next).toMatchObject({ status: "unavailable", lost: true });
    // The first check on a node that was never watched loses nothing.
    expect(nextNotificationStatus({ status: "unavailable", enabledByConsole: false, checked: false }, { refused: true }).lost).toBe(false);
  });
});
