import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { LossJournal } from "@/server/live/losses-journal";
import { LOSSES_KEPT_MS, MAX_LOSSES } from "@/server/live/store";

const T = 1_800_000_000_000;
const loss = (i: number, at = T + i) => ({ at, resource: `lock:r/${i}`, node: "node-1", kind: "restart" as const, detail: `lost ${i}`, token: `v${i}`, wentOn: false });
const fileIn = () => path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-losses-")), "data", "losses.jsonl");

describe("the losses list kept in the data folder", () => {
  it("gives each deployment its own losses back, oldest first, after a restart", () => {
    const file = fileIn();
    const journal = new LossJournal(file);
    journal.record("eu", loss(1));
    journal.record("us", loss(2));
    journal.record("eu", loss(3));
    journal.flush(T + 10);
    const next = new LossJournal(file);
    expect(next.restore("eu", T + 10).map((l) => l.resource)).toEqual(["lock:r/1", "lock:r/3"]);
    expect(next.restore("us", T + 10)).toEqual([loss(2)]);
    expect(next.restore("ap", T + 10)).toEqual([]);
  });

  it("keeps the newest losses of a burst of a million, and no more than the list shows", () => {
    const file = fileIn();
    const journal = new LossJournal(file);
    for (let i = 0; i < 1_000_000; i++) journal.record("eu", loss(i, T));
    journal.flush(T);
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(MAX_LOSSES);
    // Later bursts append until the file holds a few lists' worth, then it is rewritten with one list.
    for (let burst = 0; burst < 5; burst++) {
      for (let i = 0; i < MAX_LOSSES; i++) journal.record("eu", loss(2_000_000 + burst * MAX_LOSSES + i, T));
      journal.flush(T);
    }
    expect(readFileSync(file, "utf8").trim().split("\n").length).toBeLessThanOrEqual(3 * MAX_LOSSES);
    const restored = new LossJournal(file).restore("eu", T);
    expect(restored).toHaveLength(MAX_LOSSES);
    expect(restored.at(-1)?.resource).toBe(`lock:r/${2_000_000 + 5 * MAX_LOSSES - 1}`);
  });

  it("leaves out losses older than the list keeps, and a line cut short, and keeps the rest", () => {
    const file = fileIn();
    const journal = new LossJournal(file);
    journal.record("eu", loss(1, T - LOSSES_KEPT_MS - 1));
    journal.record("eu", loss(2, T - 1_000));
    journal.flush(T);
    // A crash in the middle of a write leaves half a line.
    appendFileSync(file, '{"deployment":"eu","at":17');
    const restored = new LossJournal(file).restore("eu", T);
    expect(restored).toEqual([loss(2, T - 1_000)]);
    // The file was rewritten with what is kept: a next start reads the same.
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
    expect(new LossJournal(file).restore("eu", T)).toEqual(restored);
  });

  it("says once that it cannot write, and the live list goes on", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-losses-"));
    // The data folder is a file: nothing can be written under it.
    writeFileSync(path.join(dir, "data"), "");
    const warnings: string[] = [];
    const journal = new LossJournal(path.join(dir, "data", "losses.jsonl"), (e) => warnings.push(e));
    journal.record("eu", loss(1));
    journal.flush(T);
    journal.record("eu", loss(2));
    journal.flush(T);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/ENOTDIR|not a directory/i);
  });
});
