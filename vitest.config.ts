import path from "node:path";
import { defineConfig } from "vitest/config";

const alias = {
  // The engine package resolves to its sources (as in tsconfig.json's paths), so tests never need a build.
  "@lockscope/redlock/compat": path.resolve(import.meta.dirname, "lib/redlock/compat.ts"),
  "@lockscope/redlock": path.resolve(import.meta.dirname, "lib/redlock/index.ts"),
  "@": path.resolve(import.meta.dirname),
  // `server-only` throws outside the react-server condition; in tests server modules run in plain Node.
  "server-only": path.resolve(import.meta.dirname, "tests/support/server-only-shim.ts"),
};

export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      // The engine package's own tests, with its own config (they run from the package alone too).
      "lib/redlock/vitest.config.ts",
      {
        resolve: { alias },
        test: { name: "unit", include: ["tests/unit/**/*.test.ts"], environment: "node" },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          include: ["tests/integration/**/*.test.ts"],
          environment: "node",
          setupFiles: ["tests/support/fail-on-unhandled.ts"],
          globalSetup: ["tests/support/global-build.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Two cores: each file starts its own redis-server processes.
          fileParallelism: true,
          maxWorkers: 2,
          pool: "forks",
        },
      },
    ],
  },
});
