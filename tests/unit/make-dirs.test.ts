import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { makeDirs } from "@/lib/make-dirs";

describe("making a folder and its parents", () => {
  it("makes every missing level with the mode asked, and accepts a folder that exists", () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "lockscope-dirs-"));
    const deep = path.join(root, "a", "b", "c");
    makeDirs(deep, 0o700);
    expect(statSync(deep).isDirectory()).toBe(true);
    expect(statSync(path.join(root, "a")).mode & 0o777).toBe(0o700);
    makeDirs(deep, 0o700);
    expect(statSync(deep).isDirectory()).toBe(true);
  });

  it("throws at once where the system refuses the folder, and names a parent that is a file", () => {
    // /proc refuses new entries with ENOENT: Node's recursive mkdir retries that forever.
    expect(() => makeDirs("/proc/lockscope-nope/deeper")).toThrow(expect.objectContaining({ code: "ENOENT" }));
    const root = mkdtempSync(path.join(os.tmpdir(), "lockscope-dirs-"));
    writeFileSync(path.join(root, "file"), "x");
    expect(() => makeDirs(path.join(root, "file", "sub"))).toThrow(expect.objectContaining({ code: "ENOTDIR" }));
    expect(() => makeDirs(path.join(root, "file"))).toThrow(/ENOTDIR: not a directory, .*file/);
  });
});
