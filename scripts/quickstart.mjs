// `npm start`: the two-command Quickstart. Builds on the first run of a fresh checkout (and again when the
// sources changed), then runs the compiled launcher in this process. Production starts `dist/start.mjs`
// (`npm run start:prod`) or the standalone folder's `start.mjs` directly: neither ever builds.
import path from "node:path";
import { ensureBuild } from "./build-if-stale.mjs";

const root = path.resolve(import.meta.dirname, "..");
if (!ensureBuild(root)) {
  process.stderr.write("lockscope: `npm run build` failed; see the output above.\n");
  process.exit(1);
}
await import(path.join(root, "dist", "start.mjs"));
