/**
 * A check the HTTP server runs on the raw request line before Next.js sees it. Next.js answers a path
 * with broken percent-encoding (`/api/locks/%E0%A4%A/release`, `%ZZ`, `%FF`), methods such as TRACE and
 * the request target `*` (`OPTIONS *`, `GET *`) with a bare 500; the contract promises a 4xx that says
 * what was wrong. Pure: no Node.js server types.
 */
import { isApiPath, refuseBeforeRouting } from "./api-routes";
import { isAllowedHost, misdirectedMessage, type HostRules } from "./host-rules";
import { API_CONTENT_SECURITY_POLICY, BASE_SECURITY_HEADERS } from "./security-headers";

export const ALLOWED_METHODS = Object.freeze(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const);

type RefusalCode = "bad_request" | "not_found" | "method_not_allowed" | "misdirected_request";

export interface RefusedRequest {
  /** 204 for OPTIONS (`*` or a route): what is supported, answered here, with no body. */
  status: 204 | 400 | 404 | 405 | 421;
  headers: Record<string, string>;
  body: { error: { code: RefusalCode; message: string } } | null;
}

const ALLOWED = new Set<string>(ALLOWED_METHODS);

const GUARD_HEADERS = { ...BASE_SECURITY_HEADERS, "Content-Security-Policy": API_CONTENT_SECURITY_POLICY, "Cache-Control": "no-store" };

function refuse(status: 400 | 404 | 405 | 421, code: RefusalCode, message: string, headers: Record<string, string> = {}): RefusedRequest {
  return { status, headers: { ...GUARD_HEADERS, "Content-Type": "application/json", ...headers }, body: { error: { code, message } } };
}

/**
 * The request's `Host`, checked before anything else runs (a page, a route, a redirect, a refusal of the
 * path): none, or more than one (RFC 9112: 400; only the first would be checked), is a 400; a name this
 * console does not answer to (DNS rebinding sends the attacker's) a 421. `hosts`: every `Host` header sent.
 */
export function checkHost(rules: HostRules, hosts: readonly string[]): RefusedRequest | null {
  if (hosts.length === 0) return refuse(400, "bad_request", "The request needs a Host header.");
  if (hosts.length > 1) return refuse(400, "bad_request", `The request has ${hosts.length} Host headers; send one.`);
  if (isAllowedHost(rules, hosts[0]!)) return null;
  return refuse(421, "misdirected_request", misdirectedMessage(hosts[0]!));
}

/** The `Host` headers of a request, from Node.js's raw header list (its `headers.host` keeps only the first). */
export function hostHeaders(rawHeaders: readonly string[]): string[] {
  const hosts: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === "host") hosts.push(rawHeaders[i + 1]!);
  return hosts;
}

/**
 * `hasBody`: the request has a body (a `Content-Length` above 0, or `Transfer-Encoding`).
 * Null when the request goes on to Next.js; otherwise the answer to send: a 4xx in the JSON error shape,
 * or 204 with `Allow` for OPTIONS (Node.js sends no body with a 204, so `body` is null).
 */
export function checkRequestLine(method: string | undefined, url: string | undefined, hasBody = false): RefusedRequest | null {
  if (!method || !ALLOWED.has(method)) {
    return refuse(405, "method_not_allowed", `Method ${(method ?? "").slice(0, 20)} is not supported; use ${ALLOWED_METHODS.join(", ")}.`, {
      Allow: ALLOWED_METHODS.join(", "),
    });
  }
  const raw = url ?? "/";
  if (raw === "*") {
    if (method === "OPTIONS") return { status: 204, headers: { ...GUARD_HEADERS, Allow: ALLOWED_METHODS.join(", ") }, body: null };
    return refuse(400, "bad_request", `The request target \`*\` is only for OPTIONS; send ${method} to a path such as /api/health.`);
  }
  // The absolute form (`GET http://host/path`) is for proxies; this server is addressed by path only, and its
  // host rules read the Host header.
  if (!raw.startsWith("/")) {
    return refuse(400, "bad_request", "The request target must be a path starting with `/` (origin form), e.g. /api/health.");
  }
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
  // What clients and Next.js rewrite into another path (a redirect, another route, another lock's name) is
  // refused as sent: a backslash (read as `/`) and a `.` or `..` segment, also percent-encoded.
  if (pathname.includes("\\")) {
    return refuse(400, "bad_request", "The request path contains a backslash, which would be read as `/`; write it as %5C where it is part of a name.");
  }
  if (pathname.includes("//")) {
    return refuse(400, "bad_request", "The request path has an empty segment (`//`), which would be merged into one `/`; write a `/` that is part of a name as %2F.");
  }
  for (const segment of pathname.split("/")) {
    const decoded = segment.length <= 6 ? decodeURIComponent(segment) : segment;
    if (decoded === "." || decoded === "..") {
      return refuse(400, "bad_request", `The request path has a \`${decoded}\` segment, which would be resolved into another path; name the resource without it.`);
    }
  }
  // The query string likewise: a broken escape would otherwise be read as other text (`?q=%ZZ` as `%ZZ`).
  if (pathEnd >= 0 && raw[pathEnd] === "?") {
    const hashAt = raw.indexOf("#", pathEnd);
    const queryText = raw.slice(pathEnd + 1, hashAt < 0 ? undefined : hashAt);
    const badQuery = /%(?![0-9A-Fa-f]{2})/.exec(queryText);
    if (badQuery) return refuse(400, "bad_request", `The query string is not valid URL encoding: \`${queryText.slice(badQuery.index, badQuery.index + 3)}\` is not a %XX escape.`);
    try {
      decodeURIComponent(queryText.replaceAll("+", " "));
    } catch {
      return refuse(400, "bad_request", "The query string is not valid URL encoding: its %XX escapes do not form UTF-8 text.");
    }
  }
  // Next.js answers an API path with a trailing slash with a redirect to the path without it.
  if (isApiPath(pathname) && pathname.endsWith("/")) {
    return refuse(404, "not_found", `There is no API route at ${pathname.slice(0, 200)}: drop the trailing slash.`);
  }
  // Here rather than in the proxy alone: a request with a body skips the proxy (see proxy.ts), and would
  // otherwise get Next.js's HTML 404 or empty 405.
  const routing = refuseBeforeRouting(method, pathname);
  // A page (or a static file) asked for with a body would skip the proxy too, and with it the host check and
  // the page's security headers: pages take no body.
  if (!routing && hasBody && !isApiPath(pathname)) {
    return refuse(400, "bad_request", `A page request carries no body; send ${method} ${pathname.slice(0, 200)} without one.`);
  }
  if (routing) {
    const allow: Record<string, string> = routing.allow ? { Allow: routing.allow } : {};
    if (routing.code === null) return { status: 204, headers: { ...GUARD_HEADERS, ...allow }, body: null };
    return refuse(routing.status, routing.code, routing.message, allow);
  }
  return null;
}

type ParserRefusal = readonly [status: number, reason: string, code: string, message: string];

const NOT_HTTP: ParserRefusal = [400, "Bad Request", "bad_request", "The request is not valid HTTP/1.1 (its request line and header names must be ASCII)."];
const TIMED_OUT: ParserRefusal = [408, "Request Timeout", "request_timeout", "The request did not arrive in time."];

/** What each of Node.js's parser errors is told; any other is `NOT_HTTP`. */
const PARSER_REFUSALS: ReadonlyMap<string, ParserRefusal> = new Map(Object.entries({
  HPE_INVALID_CONTENT_LENGTH: [400, "Bad Request", "bad_request", "The request's Content-Length is not a number."],
  HPE_UNEXPECTED_CONTENT_LENGTH: [400, "Bad Request", "bad_request", "The request gives Content-Length more than once: send it once."],
  HPE_INVALID_TRANSFER_ENCODING: [
    400,
    "Bad Request",
    "bad_request",
    "The request's Transfer-Encoding is not chunked, or comes with a Content-Length: send Transfer-Encoding: chunked or a Content-Length, not both.",
  ],
  HPE_HEADER_OVERFLOW: [431, "Request Header Fields Too Large", "headers_too_large", "The request's headers are larger than this server accepts (16 KiB in all, the request line included)."],
  ERR_HTTP_REQUEST_TIMEOUT: TIMED_OUT,
  HPE_HEADER_TIMEOUT: TIMED_OUT,
}));

/**
 * The whole HTTP answer to a request Node.js's own parser refused before any handler ran (its `clientError`:
 * headers over the size limit, a request that took too long to arrive, bytes that are not HTTP),
 * in the contract's JSON shape with the security headers, and the connection closed. Node.js alone answers a
 * bare 400 with neither. `code` is Node.js's error code; it is not shown. `firstLine`: the request's first line, as
 * far as it came.
 */
export function clientErrorResponse(code: string | undefined, firstLine = ""): string {
  // A request line of an unknown method (`FOO /path HTTP/1.1`) is a method this server does not support; bytes
  // that are no request line at all are not HTTP.
  if (code === "HPE_INVALID_METHOD" && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+ \S+ HTTP\/1\.[01]\r?$/.test(firstLine)) {
    return rawResponse(405, "Method Not Allowed", { error: { code: "method_not_allowed", message: `The request's method is not supported; use ${ALLOWED_METHODS.join(", ")}.` } }, { Allow: ALLOWED_METHODS.join(", ") });
  }
  const [status, reason, errorCode, message] = (code === undefined ? undefined : PARSER_REFUSALS.get(code)) ?? NOT_HTTP;
  return rawResponse(status, reason, { error: { code: errorCode, message } });
}

/**
 * A `CONNECT` request (a tunnel through a proxy, which this server is not), answered on its socket: Node.js hands
 * it to no request handler.
 */
export function connectResponse(): string {
  const refused = checkRequestLine("CONNECT", "/");
  return rawResponse(405, "Method Not Allowed", refused?.body ?? null, { Allow: ALLOWED_METHODS.join(", ") });
}

/** A whole HTTP answer in the contract's JSON shape with the security headers, the connection closed. */
function rawResponse(status: number, reason: string, body: unknown, extra: Record<string, string> = {}): string {
  const text = JSON.stringify(body);
  const headers = { ...GUARD_HEADERS, ...extra, "Content-Type": "application/json", "Content-Length": String(new TextEncoder().encode(text).length), Connection: "close" };
  return `HTTP/1.1 ${status} ${reason}\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("")}\r\n${text}`;
}
