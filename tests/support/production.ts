import { readFileSync } from "node:fs";
import path from "node:path";

/**
 * Node.js's own flags of the production start (`npm run start:prod`): the container's CMD repeats them, and the
 * benchmark and the deploy test start the console with them, as production does.
 */
export const PROD_NODE_ARGS: readonly string[] = (
  JSON.parse(readFileSync(path.resolve(import.meta.dirname, "../../package.json"), "utf8")) as { scripts: Record<string, string> }
).scripts["start:prod"]!
  .split(/\s+/)
  .filter((arg) => arg.startsWith("--"));
