import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
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
    // TypeScript's node10 resolution reads no `exports`: the subpath's types are mapped for it here.
    expect(manifest.typesVersions).toEqual({ "*": { compat: ["./dist/compat.d.ts"] } });
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

  // The consumer files below are type-checked together, in one run of tsc (it takes a while on a small machine).
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const readmeBlocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code!);
  const consumerFiles: Record<string, string> = {
    // The examples name a connection `redis` they do not make.
    ...Object.fromEntries(readmeBlocks.map((code, i) => [`example-${i + 1}.ts`, `import type { Redis as AnyRedis } from "ioredis";\ndeclare const redis: AnyRedis;\n${code}`])),
    // Code written against node-redlock 5.x's type declarations, using every name they export.
    "switched.ts": `import { Redis } from "ioredis";
import Redlock, { ExecutionError, Lock, ResourceLockedError } from "@lockscope/redlock/compat";
import type { ClientExecutionResult, ExecutionResult, ExecutionStats, RedlockAbortSignal, Settings } from "@lockscope/redlock/compat";

const settings: Partial<Settings> = { retryCount: 3, retryDelay: 200 };
const redlock = new Redlock([new Redis()], settings);
redlock.on("error", (error: unknown) => {
  if (error instanceof ResourceLockedError) return;
});
export function votes(result: ClientExecutionResult): string {
  return result.vote === "for" ? \`for: \${result.value}\` : \`against: \${result.error.message}\`;
}
export async function held(): Promise<number> {
  const lock: Lock = await redlock.acquire(["a"], 1000);
  const result: ExecutionResult = await lock.release();
  const stats: ExecutionStats[] = await Promise.all(result.attempts);
  return stats.length;
}
export function work(): Promise<string> {
  return redlock.using(["a"], 1000, async (signal: RedlockAbortSignal) => {
    if (signal.aborted && signal.error instanceof ExecutionError) throw signal.error;
    return "done";
  });
}
`,
    "legacy.ts": `import { Redis } from "ioredis";
import Redlock from "@lockscope/redlock/compat";

const options: Redlock.Options = { driftFactor: 0.01, retryCount: 3, retryDelay: 200, retryJitter: 100 };
const redlock = new Redlock([new Redis()], options);
let held: Redlock.Lock | null = null;
const attempts: number[] = [];
const done: Redlock.Callback<void> = (error) => {
  if (error instanceof Redlock.LockError) attempts.push(error.attempts);
};
held = await redlock.lock("orders/42", 1000);
held = await held.extend(1000);
held.unlock(done);
const failed: Redlock.LockError = new Redlock.LockError("x");
void failed;
`,
  };
  let consumerErrors: string[] | undefined;
  // A type-check takes a while on a small, busy machine (skipLibCheck on, as `tsc --init` sets it, keeps it short).
  const TSC_TIMEOUT_MS = 120_000;

  /**
   * tsc's errors for `file` of a plain ESM TypeScript project (NodeNext, strict) that installed the packed package
   * and ioredis and holds `consumerFiles`.
   */
  function consumerErrorsIn(file: string): string[] {
    consumerErrors ??= typecheckConsumer(consumerFiles);
    return consumerErrors.filter((line) => line.startsWith(`${file}(`));
  }

  function typecheckConsumer(
    files: Record<string, string>,
    compilerOptions: Record<string, unknown> = { module: "NodeNext", moduleResolution: "NodeNext" },
    /** link: the package folder itself; tarball: what `npm pack` makes, unpacked as `npm install` would (no sources beside it). */
    install: "link" | "tarball" = "link",
  ): string[] {
    const require = createRequire(import.meta.url);
    const project = mkdtempSync(path.join(tmpdir(), "redlock-consumer-"));
    try {
      const modules = path.join(project, "node_modules");
      mkdirSync(path.join(modules, "@lockscope"), { recursive: true });
      mkdirSync(path.join(modules, "@types"), { recursive: true });
      if (install === "link") symlinkSync(root, path.join(modules, "@lockscope", "redlock"), "dir");
      else {
        const packedJson = execFileSync("npm", ["pack", "--json", "--pack-destination", project], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
        const [tarball] = JSON.parse(packedJson.slice(packedJson.indexOf("["))) as Array<{ filename: string }>;
        const target = path.join(modules, "@lockscope", "redlock");
        mkdirSync(target);
        execFileSync("tar", ["-xzf", path.join(project, tarball!.filename), "-C", target, "--strip-components=1"]);
      }
      symlinkSync(path.dirname(require.resolve("ioredis/package.json")), path.join(modules, "ioredis"), "dir");
      symlinkSync(path.dirname(require.resolve("@types/node/package.json")), path.join(modules, "@types", "node"), "dir");
      writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
      writeFileSync(
        path.join(project, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { target: "ES2022", ...compilerOptions, strict: true, noEmit: true, skipLibCheck: true, types: ["node"] }, include: ["*.ts"] }),
      );
      for (const [name, code] of Object.entries(files)) writeFileSync(path.join(project, name), code);
      try {
        execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", project], { cwd: project, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
        return [];
      } catch (error) {
        return String((error as { stdout?: string }).stdout ?? error).split("\n").filter((line) => line.trim() !== "");
      }
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  }

  it("the README's TypeScript examples compile against the built types in a plain ESM project (NodeNext, strict)", () => {
    expect(readmeBlocks.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i <= readmeBlocks.length; i++) expect(consumerErrorsIn(`example-${i}.ts`)).toEqual([]);
  }, TSC_TIMEOUT_MS);

  it("node-redlock 5.x code typed as its own declarations had it (every exported name) compiles against the compat entry", () => {
    expect(consumerErrorsIn("switched.ts")).toEqual([]);
  }, TSC_TIMEOUT_MS);

  it("node-redlock 4.x code typed as @types/redlock declared it (Redlock.Lock, Redlock.Options, …) compiles against the compat entry", () => {
    expect(consumerErrorsIn("legacy.ts")).toEqual([]);
  }, TSC_TIMEOUT_MS);

  it("both entry points have their types in a project on TypeScript's older resolution (moduleResolution node10), which does not read `exports`", () => {
    const errors = typecheckConsumer(
      {
        "node10.ts": `import { Redlock, ResourceHeldError } from "@lockscope/redlock";
import Compat, { ExecutionError } from "@lockscope/redlock/compat";

export function make(clients: ConstructorParameters<typeof Redlock>[0]): [Redlock, Compat, boolean] {
  const error: unknown = null;
  return [new Redlock(clients), new Compat(clients), error instanceof ResourceHeldError || error instanceof ExecutionError];
}
`,
      },
      { module: "commonjs", moduleResolution: "node10", esModuleInterop: true },
      "tarball",
    );
    expect(errors).toEqual([]);
  }, TSC_TIMEOUT_MS);
});
