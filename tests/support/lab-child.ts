/**
 * One lab run in a process of its own, for a test to kill mid-run: `node --import tsx lab-child.ts <node
 * urls, comma-separated> <run id> <key TTL ms> <strategy>`. Prints the units sold so far, one number a line.
 */
import { LabRun } from "@/lib/lab/runner";
import type { Strategy } from "@/lib/lab/settings";

const [urls = "", id = "", keyTtlMs = "", strategy = "redlock"] = process.argv.slice(2);
const run = new LabRun({
  id,
  settings: { strategy: strategy as Strategy, stock: 100_000, workers: 5, ttlMs: 2_000, workMs: 5 },
  nodeUrls: urls.split(","),
  keyTtlMs: Number(keyTtlMs),
});
void run.run();
setInterval(() => process.stdout.write(`${run.progress().sold}\n`), 50);
