/** True when `.next/BUILD_ID` and `dist/start.mjs` exist and are newer than every source. */
export function buildIsFresh(root: string): boolean;
/** Runs `npm run build` when stale (serialised with flock); false when the build failed. */
export function ensureBuild(root: string): boolean;
