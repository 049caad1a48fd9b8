import { defineConfig } from "vitest/config";

// The package's own tests: real redis-server processes on free ports, nothing from the console around it.
export default defineConfig({
  test: {
    name: "redlock",
    root: import.meta.dirname,
    include: ["test/**/*.test.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file starts its own redis-server processes; two at a time suit a small machine.
    maxWorkers: 2,
    pool: "forks",
  },
});
