import { describe, expect, it } from "vitest";
import { HistoryQuery } from "@/server/history/query";

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
});
