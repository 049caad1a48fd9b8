import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as Record<string, unknown>;

interface PackResult {
  name: string;
  files: Array<{ path: string }>;
}

describe("the published package", () => {
  // `npm pack` runs `prepack`, which builds dist/ with tsc: what is checked is what would be published.
  const output = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts=false"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  const [packed] = JSON.parse(output.slice(output.indexOf("["))) as PackResult[];
  const files = packed!.files.map((f) => f.path).sort();

  it("holds the built entry points with their types, the docs and nothing else", () => {
    for (const entry of ["index", "compat"]) {
      expect(files).toContain(`dist/${entry}.js`);
      expect(files).toContain(`dist/${entry}.d.ts`);
    }
    for (const doc of ["README.md", "LICENSE", "CHANGELOG.md", "package.json"]) expect(files).toContain(doc);
    const stray = files.filter((f) => !(f.startsWith("dist/") && (f.endsWith(".js") || f.endsWith(".d.ts"))) && !["README.md", "LICENSE", "CHANGELOG.md", "package.json"].includes(f));
    expect(stray).toEqual([]);
    expect(files.some((f) => f.includes("test") || f.includes("vitest"))).toBe(false);
  });

  it("declares what a consumer's resolver needs", () => {
    expect(manifest).toMatchObject({ name: "@lockscope/redlock", type: "module", sideEffects: false, engines: { node: expect.any(String) as unknown } });
    expect(manifest.exports).toEqual({
      ".": { types: "./dist/index.d.ts", default: "./dist/index.js" },
      "./compat": { types: "./dist/compat.d.ts", default: "./dist/compat.js" },
      "./package.json": "./package.json",
    });
  });

  it("runs in plain Node from the build (no bundler): relative imports carry .js, and only node: built-ins are imported", async () => {
    for (const file of files.filter((f) => f.endsWith(".js"))) {
      const source = readFileSync(path.join(root, file), "utf8");
      for (const [, specifier] of source.matchAll(/(?:from|import\()\s*"([^"]+)"/g)) {
        expect(specifier!.startsWith("node:") || /^\.\/[\w.-]+\.js$/.test(specifier!), `${file} imports ${specifier}`).toBe(true);
      }
    }
    const native = (await import(pathToFileURL(path.join(root, "dist/index.js")).href)) as Record<string, unknown>;
    expect(typeof native.Redlock).toBe("function");
    expect(native.quorumOf).toBeTypeOf("function");
    // Internals stay inside: no lock constructor, no resolved-settings helper.
    expect(native.RedlockLock).toBeUndefined();
    expect(native.resolveSettings).toBeUndefined();
    const compat = (await import(pathToFileURL(path.join(root, "dist/compat.js")).href)) as Record<string, unknown>;
    expect(typeof compat.default).toBe("function");
    expect(typeof compat.ExecutionError).toBe("function");
    expect(typeof compat.ResourceLockedError).toBe("function");
  });
});
