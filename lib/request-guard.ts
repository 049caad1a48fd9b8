/**
 * A check the HTTP server runs on the raw request line before Next.js sees it. Next.js answers a path
 * with broken percent-encoding (`/api/locks/%E0%A4%A/release`, `%ZZ`, `%FF`) and methods such as TRACE
 * with a bare 500; the contract promises a 4xx that says what was wrong. Pure: no Node.js server types.
 */

export const ALLOWED_METHODS = Object.freeze(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const);

export interface RefusedRequest {
  status: 400 | 405;
  headers: Record<string, string>;
  body: { error: { code: "bad_request" | "method_not_allowed"; message: string } };
}

const ALLOWED = new Set<string>(ALLOWED_METHODS);

function refuse(status: 400 | 405, code: "bad_request" | "method_not_allowed", message: string, headers: Record<string, string> = {}): RefusedRequest {
  return { status, headers: { "Content-Type": "application/json", "Cache-Control": "no-store", ...headers }, body: { error: { code, message } } };
}

/** Null when the request line is fine; otherwise the 4xx to answer with. */
export function checkRequestLine(method: string | undefined, url: string | undefined): RefusedRequest | null {
  if (!method || !ALLOWED.has(method)) {
    return refuse(405, "method_not_allowed", `Method ${(method ?? "").slice(0, 20)} is not supported; use ${ALLOWED_METHODS.join(", ")}.`, {
      Allow: ALLOWED_METHODS.join(", "),
    });
  }
  const raw = url ?? "/";
  const pathEnd = raw.search(/[?#]/);
  const pathname = pathEnd < 0 ? raw : raw.slice(0, pathEnd);
  const bad = /%(?![0-9A-Fa-f]{2})/.exec(pathname);
  if (bad) {
    return refuse(400, "bad_request", `The request path is not valid URL encoding: \`${pathname.slice(bad.index, bad.index + 3)}\` is not a %XX escape.`);
  }
  try {
    decodeURIComponent(pathname);
  } catch {
    return refuse(400, "bad_request", "The request path is not valid URL encoding: its %XX escapes do not form UTF-8 text.");
  }
  return null;
}
