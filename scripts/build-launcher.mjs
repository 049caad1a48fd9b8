// The second half of `npm run build` (after `next build`): compiles the launcher to plain JavaScript, so a
// production install (`npm ci --omit=dev`) starts without tsx, and assembles the standalone folder.
import { build } from "esbuild";
import { cpSync, existsSync, rmSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const outfile = path.join(root, "dist", "start.mjs");

await build({
  entryPoints: [path.join(root, "scripts", "start.ts")],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  // Next.js is loaded from node_modules at run time (the standalone folder carries its own copy);
  // everything else the launcher uses (config parsing, @next/env, zod) is bundled in.
  external: ["next", "next/*"],
  alias: { "@": root },
  // Bundled CommonJS (@next/env's) calls require() for Node's own modules and reads __dirname.
  banner: {
    js: [
      'import { createRequire as __lockscopeCreateRequire } from "node:module";',
      "const require = __lockscopeCreateRequire(import.meta.url);",
      "const __filename = import.meta.filename;",
      "const __dirname = import.meta.dirname;",
    ].join(" "),
  },
  logLevel: "warning",
  legalComments: "none",
});

// Next.js writes `.next/standalone` (a server with only the node_modules it needs) but leaves the static
// assets and `public/` to be copied beside it; the launcher goes in too, so the folder starts on its own
// with `node start.mjs`.
const standalone = path.join(root, ".next", "standalone");
if (existsSync(standalone)) {
  const staticDir = path.join(standalone, ".next", "static");
  rmSync(staticDir, { recursive: true, force: true });
  cpSync(path.join(root, ".next", "static"), staticDir, { recursive: true });
  if (existsSync(path.join(root, "public"))) cpSync(path.join(root, "public"), path.join(standalone, "public"), { recursive: true });
  cpSync(outfile, path.join(standalone, "start.mjs"));
}
