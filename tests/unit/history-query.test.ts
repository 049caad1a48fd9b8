import { describe, expect, it } from "vitest";
import { AT_FUTURE_SLACK_MS, HistoryQuery, LockHistoryQuery } from "@/server/history/query";

const issues = (query: Record<string, string>) => {
  const parsed = HistoryQuery.safeParse(query);
  return parsed.success ? [] : parsed.error.issues.map((i) => i.message);
};

describe("the history routes' time bounds", () => {
  it("reads a day of any year from 0001 to 9999, and refuses only a day its month does not have", () => {
    for (const day of ["0050-06-15", "0001-01-01", "0004-02-29", "0099-12-31T23:59:59Z", "1969-07-20T20:17:40Z", "2024-02-29"]) {
      const parsed = HistoryQuery.safeParse({ at: day });
      expect(parsed.success, `${day}: ${JSON.stringify(issues({ at: day }))}`).toBe(true);
      expect(parsed.data?.at).toBe(Date.parse(day));
    }
    for (const day of ["0001-02-29", "0050-04-31", "2025-02-29"]) expect(issues({ at: day })).toEqual([`\`at\` names a day that does not exist (${day})`]);
  });

  it("refuses an instant later than now (a mistyped year), and takes one a browser's clock a little ahead names", () => {
    const future = "`at` is later than now: the history tells who held a lock up to now (the live view shows who holds it)";
    const nextYear = new Date(Date.now() + 366 * 86_400_000).toISOString();
    expect(issues({ at: nextYear })).toEqual([future]);
    expect(issues({ at: String(Date.now() + AT_FUTURE_SLACK_MS + 60_000) })).toEqual([future]);
    const lock = LockHistoryQuery.safeParse({ at: "9999-12-31" });
    expect(lock.success ? [] : lock.error.issues.map((i) => i.message)).toEqual([future]);
    expect(HistoryQuery.safeParse({ at: String(Date.now() + 60_000) }).success).toBe(true);
    expect(HistoryQuery.safeParse({ from: String(Date.now() - 1_000), to: nextYear }).success).toBe(true);
  });
});
