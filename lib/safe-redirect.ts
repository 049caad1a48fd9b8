/**
 * Where the sign-in page may send the browser afterwards. `next` comes from the query string, so it is
 * attacker-chosen: browsers read `/\evil.example` and `/<TAB>/evil.example` as `//evil.example`, another
 * host. The path is therefore resolved as a URL against the console's own origin and kept only when it
 * still points there, and only as a path (never a protocol-relative `//…` that the browser would resolve
 * against another host when it is assigned to `location`). Pure: the server and the browser both use it.
 */
export function sameOriginPath(next: string | null | undefined, origin: string, fallback = "/"): string {
  if (typeof next !== "string" || next === "" || next.length > 2048 || !next.startsWith("/")) return fallback;
  let base: URL;
  let target: URL;
  try {
    base = new URL(origin);
    target = new URL(next, base);
  } catch {
    return fallback;
  }
  if (target.origin !== base.origin) return fallback;
  const path = `${target.pathname}${target.search}${target.hash}`;
  // `/.//evil.example` resolves to the path `//evil.example`, which `location.assign` would treat as a host.
  if (!path.startsWith("/") || path.startsWith("//") || path.startsWith("/\\")) return fallback;
  return path;
}
