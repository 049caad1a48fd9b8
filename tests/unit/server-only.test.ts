import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");

function modules(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const at = path.join(dir, entry.name);
    if (entry.isDirectory()) return modules(at);
    return /\.tsx?$/.test(entry.name) ? [at] : [];
  });
}

describe("the server's modules", () => {
  // A browser bundle that imported one (its secrets, its Redis connections) fails the build instead of shipping it.
  it("each start with import \"server-only\"", () => {
    const missing = modules("server").filter((file) => !readFileSync(path.join(ROOT, file), "utf8").startsWith('import "server-only";'));
    expect(missing).toEqual([]);
  });

  it("are not imported by lib/, which the browser and the engine package use too", () => {
    const importing = modules("lib").filter((file) => /from "(@\/server\/|(\.\.\/)+server\/)/.test(readFileSync(path.join(ROOT, file), "utf8")));
    expect(importing).toEqual([]);
  });
});
