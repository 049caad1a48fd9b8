import { describe, expect, it } from "vitest";
import { afterLoad, type LoadMoreWords } from "@/components/load-more";

const words: LoadMoreWords = {
  label: "Load older entries",
  busyLabel: "Loading older entries…",
  one: "older entry",
  many: "older entries",
  done: "loaded",
  end: "No older entries are left.",
  noneYet: "None found yet.",
};
const answer = (keys: string[], more: boolean) => ({ keys, more, failed: false });

describe("what a load more button says and where focus goes once the rows are in", () => {
  it("goes to the first row added and says how many came", () => {
    expect(afterLoad(["e9", "e8"], answer(["e9", "e8", "e7", "e6"], true), words)).toEqual({ said: "2 older entries loaded.", focus: { row: "e7" } });
  });

  it("says so when the rows added were the last ones", () => {
    expect(afterLoad(["e9", "e8"], answer(["e9", "e8", "e7"], false), words)).toEqual({ said: "1 older entry loaded. No older entries are left.", focus: { row: "e7" } });
  });

  it("does not count newer rows a refresh brought in at the top as loaded", () => {
    expect(afterLoad(["e9", "e8"], answer(["e11", "e10", "e9", "e8", "e7"], true), words)).toEqual({ said: "1 older entry loaded.", focus: { row: "e7" } });
  });

  it("counts the rows not shown before when the last row shown is gone", () => {
    expect(afterLoad(["e9", "e8"], answer(["e9", "e7", "e6"], true), words)).toEqual({ said: "2 older entries loaded.", focus: { row: "e7" } });
  });

  it("leaves focus on the button when nothing came yet more is left", () => {
    expect(afterLoad(["e9"], answer(["e9"], true), words)).toEqual({ said: "None found yet.", focus: null });
  });

  it("goes to the last row when nothing came and nothing is left (the button goes)", () => {
    expect(afterLoad(["e9", "e8"], answer(["e9", "e8"], false), words)).toEqual({ said: "No older entries are left.", focus: { row: "e8" } });
  });

  it("goes to the fallback when there is no row at all", () => {
    expect(afterLoad([], answer([], false), words)).toEqual({ said: "No older entries are left.", focus: "fallback" });
    expect(afterLoad([], answer(["e1"], false), words)).toEqual({ said: "1 older entry loaded. No older entries are left.", focus: { row: "e1" } });
  });
});
