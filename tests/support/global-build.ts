import path from "node:path";
import { ensureBuild } from "../../scripts/build-if-stale.mjs";

/**
 * Integration tests that start the real launcher need the production bundle; build it once, before any
 * test file runs, when it is missing or stale (the same check `npm start` makes).
 */
export default function setup(): void {
  const root = path.resolve(import.meta.dirname, "../..");
  if (!ensureBuild(root)) throw new Error("`npm run build` failed; the integration tests that start the console need it.");
}
