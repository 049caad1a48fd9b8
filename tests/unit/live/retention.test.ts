import { describe, expect, it } from "vitest";
import { LINGER_MS, RECENT_CAP, RECENT_TTL_MS, Retention } from "@/server/live/retention";

const T = 1_800_000_000_000;
type Ended = { name: string; endedAt: number | null };

function retention() {
  const forgotten: string[] = [];
  const kept = new Retention<Ended>((lock) => forgotten.push(lock.name));
  return { kept, forgotten };
}

describe("what is kept of ended locks", () => {
  it("lets ended locks leave the list in the order they ended, a lock that ended again at its new end", () => {
    const { kept } = retention();
    kept.linger("lock:a", T);
    kept.linger("lock:b", T + 10);
    kept.linger("lock:c", T + 20);
    // lock:a was taken and ended again: it lingers from its new end.
    kept.linger("lock:a", T + 30);
    kept.stopLingering("lock:b");
    const left: string[] = [];
    kept.lingered(T + 25 + LINGER_MS, (resource, endedAt) => left.push(`${resource}@${endedAt - T}`));
    expect(left).toEqual(["lock:c@20"]);
    kept.lingered(T + 30 + LINGER_MS, (resource, endedAt) => left.push(`${resource}@${endedAt - T}`));
    expect(left).toEqual(["lock:c@20", "lock:a@30"]);
    expect(kept.sizes().lingering).toBe(0);
  });

  it("keeps the latest RECENT_CAP ended locks, forgetting the oldest first, a lock kept again counting from then", () => {
    const { kept, forgotten } = retention();
    for (let i = 0; i < RECENT_CAP; i++) kept.keep(`lock:${i}`, { name: `${i}`, endedAt: T }, T);
    // lock:0 ended again (a new lock of the same key): the old one is forgotten, the new one is the latest.
    kept.keep("lock:0", { name: "0 again", endedAt: T + 1 }, T + 1);
    expect(forgotten).toEqual(["0"]);
    kept.keep("lock:new-1", { name: "new-1", endedAt: T + 2 }, T + 2);
    kept.keep("lock:new-2", { name: "new-2", endedAt: T + 2 }, T + 2);
    expect(forgotten).toEqual(["0", "1", "2"]);
    expect(kept.kept("lock:0")?.name).toBe("0 again");
    // Taken again (held): no longer kept, and not forgotten later in its place.
    expect(kept.take("lock:3")?.name).toBe("3");
    kept.keep("lock:new-3", { name: "new-3", endedAt: T + 3 }, T + 3);
    expect(forgotten).toEqual(["0", "1", "2"]);
    kept.keep("lock:new-4", { name: "new-4", endedAt: T + 3 }, T + 3);
    expect(forgotten).toEqual(["0", "1", "2", "4"]);
    expect(kept.sizes().recent).toBe(RECENT_CAP);
  });

  it("forgets ended locks past RECENT_TTL_MS, and keeps order through many ends of the same few keys", () => {
    const { kept, forgotten } = retention();
    kept.keep("lock:old", { name: "old", endedAt: T }, T);
    // The same three keys ended 30,000 times over: each is kept once, the latest.
    for (let i = 0; i < 30_000; i++) kept.keep(`lock:k${i % 3}`, { name: `k${i}`, endedAt: T + 1_000 + i }, T + 1_000 + i);
    expect(kept.sizes().recent).toBe(4);
    expect([...kept.keptLocks()].map((l) => l.name)).toEqual(["old", "k29997", "k29998", "k29999"]);
    kept.keep("lock:late", { name: "late", endedAt: T + RECENT_TTL_MS + 500 }, T + RECENT_TTL_MS + 500);
    expect(forgotten.at(-1)).toBe("old");
    expect(kept.kept("lock:old")).toBeUndefined();
    expect(kept.kept("lock:k2")?.name).toBe("k29999");
  });
});
