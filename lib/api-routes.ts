/**
 * The API's routes and the methods each serves, so that the request-line guard and the proxy can answer
 * an unknown `/api/*` path with a JSON 404 and a method the route does not serve with a JSON 405 (Next.js
 * answers the first with its HTML 404 page and the second with an empty 405). `tests/integration/fuzz.test.ts` checks this
 * table against the route files in `app/`, so a route added there and not here fails the tests.
 */

export type RouteMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface ApiRoute {
  /** As in `app/`: `[name]` is one path segment. */
  pattern: string;
  methods: readonly RouteMethod[];
}

export const API_ROUTES: readonly ApiRoute[] = Object.freeze([
  { pattern: "/api/audit", methods: ["GET"] },
  { pattern: "/api/audit/export", methods: ["GET"] },
  { pattern: "/api/demo/runs", methods: ["GET", "POST"] },
  { pattern: "/api/demo/runs/[id]", methods: ["GET", "DELETE"] },
  { pattern: "/api/discovery", methods: ["GET"] },
  { pattern: "/api/health", methods: ["GET"] },
  { pattern: "/api/history", methods: ["GET"] },
  { pattern: "/api/locks", methods: ["GET"] },
  { pattern: "/api/locks/groups", methods: ["GET"] },
  { pattern: "/api/locks/stream", methods: ["GET"] },
  { pattern: "/api/locks/[resource]", methods: ["GET"] },
  { pattern: "/api/locks/[resource]/history", methods: ["GET"] },
  { pattern: "/api/locks/[resource]/release", methods: ["POST"] },
  { pattern: "/api/losses", methods: ["GET"] },
  { pattern: "/api/patterns", methods: ["GET", "PUT"] },
  { pattern: "/api/ready", methods: ["GET"] },
  { pattern: "/api/session", methods: ["GET", "POST", "DELETE"] },
  { pattern: "/metrics", methods: ["GET"] },
]);

/** Whether a path belongs to the API (JSON answers) rather than to the pages. */
export function isApiPath(pathname: string): boolean {
  return pathname === "/api" || pathname.startsWith("/api/") || pathname === "/metrics" || pathname.startsWith("/metrics/");
}

function matches(pattern: string, pathname: string): boolean {
  const want = pattern.split("/");
  const got = pathname.split("/");
  if (want.length !== got.length) return false;
  return want.every((segment, i) => (/^\[[^\]]+\]$/.test(segment) ? (got[i] ?? "") !== "" : segment === got[i]));
}

/**
 * The route a path names. A literal segment wins over a `[param]` one, as in Next.js
 * (`/api/locks/stream` is the stream, not the lock named `stream`).
 */
export function matchApiRoute(pathname: string): ApiRoute | null {
  const path = pathname.length > 1 && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname;
  const candidates = API_ROUTES.filter((r) => matches(r.pattern, path));
  return candidates.find((r) => !r.pattern.includes("[")) ?? candidates[0] ?? null;
}

/** The methods to list in `Allow` for a route: HEAD wherever GET is, and OPTIONS everywhere. */
export function allowedMethods(route: ApiRoute): string[] {
  return [...route.methods, ...(route.methods.includes("GET") ? ["HEAD"] : []), "OPTIONS"];
}

/** The 204 answer to OPTIONS is no error: it has no code. */
export type RouteRefusal =
  | { status: 204; code: null; message: string; allow: string }
  | { status: 404 | 405; code: "not_found" | "method_not_allowed"; message: string; allow: string | null };

/** Pages are read, never posted to (the console has no server actions). */
const PAGE_METHODS = ["GET", "HEAD", "OPTIONS"];

/**
 * What the console answers before any route runs, for a path (without its query) and method: OPTIONS on
 * a route (204 with `Allow`), an unknown API path (404), a method nobody serves there (405); null when
 * the request goes on to its route or page.
 */
export function refuseBeforeRouting(method: string, pathname: string): RouteRefusal | null {
  if (!isApiPath(pathname)) {
    // (Next.js answers OPTIONS on a page with a 400, on a static file with a 500.)
    if (method === "OPTIONS") return { status: 204, code: null, message: "", allow: PAGE_METHODS.join(", ") };
    if (PAGE_METHODS.includes(method)) return null;
    return { status: 405, code: "method_not_allowed", message: `Pages answer ${PAGE_METHODS.join(", ")}, not ${method}.`, allow: PAGE_METHODS.join(", ") };
  }
  const route = matchApiRoute(pathname);
  if (!route) {
    return { status: 404, code: "not_found", message: `There is no API route at ${pathname.slice(0, 200)}; the routes are listed in docs/api.md.`, allow: null };
  }
  const allow = allowedMethods(route).join(", ");
  if (method === "OPTIONS") return { status: 204, code: null, message: "", allow };
  if (!allow.split(", ").includes(method)) {
    return { status: 405, code: "method_not_allowed", message: `${route.pattern} does not answer ${method}; it answers ${allow}.`, allow };
  }
  return null;
}
