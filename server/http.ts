import "server-only";
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { setSecurityHeaders } from "@/lib/security-headers";
import { actorHeaderProblem, authenticate, checkOrigin, requireRole, type Principal } from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { assertServedHost } from "./host-check";
import { getLogger } from "./logger";
import { observeHttpRequest } from "./metrics";

export const MAX_BODY_BYTES = 16 * 1024;

/**
 * The status logged and counted for a request whose client hung up before its body arrived (nginx's
 * convention): nobody receives the answer, and it is not a server error.
 */
export const CLIENT_CLOSED_STATUS = 499;

/** The client went away while its body was being read. */
class ClientClosedRequest extends Error {
  constructor(cause: unknown) {
    super("the client closed the connection before its body was read", { cause });
    this.name = "ClientClosedRequest";
  }
}

/**
 * `probe`: anyone, and the credentials sent are not read at all (health and readiness checks: a load balancer's
 * probe that carries a stale or foreign Authorization header still gets its answer, never a 401 or 429; and
 * sign-out, which reads the session cookie itself: a bearer token beside it must not stop it; and /metrics, which
 * checks its own token);
 * `public`: anyone, with the principal when the credentials are good.
 */
type Access = "probe" | "public" | "viewer" | "operator";

export interface RouteContext<P, Q, B> {
  request: Request;
  params: P;
  query: Q;
  body: B;
  /** null only on `public` routes when nobody signed in. */
  principal: Principal | null;
  requestId: string;
}

interface RouteSpec<P, Q, B> {
  /** A route name for logs and metrics, e.g. "POST /api/locks/[resource]/release" (never a lock key). */
  name: string;
  access: Access;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
}

type NextContext = { params: Promise<Record<string, string | string[] | undefined>> };

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Renders a zod failure as one sentence a person can act on. */
export function describeZodError(error: z.ZodError, where: string): string {
  // An issue of the whole query or body (an unknown field, `from` after `to`) is said without a prefix:
  // "Invalid query: query: …" said it twice.
  const parts = error.issues.slice(0, 5).map((issue) => {
    const at = issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
    if (issue.code === "unrecognized_keys") return `${at}unknown field(s) ${issue.keys.map((k) => `\`${k}\``).join(", ")}`;
    return `${at}${issue.message}`;
  });
  return `Invalid ${where}: ${parts.join("; ")}.`;
}

export function errorResponse(error: ApiError, requestId?: string): Response {
  return Response.json(
    { error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) } },
    {
      status: error.status,
      headers: { "Cache-Control": "no-store", ...(requestId ? { "X-Request-Id": requestId } : {}), ...(error.headers ?? {}) },
    },
  );
}

async function readJsonBody(request: Request): Promise<unknown> {
  const type = request.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new ApiError("unsupported_media_type", "Send the body as JSON with `Content-Type: application/json`.");
  }
  // A compressed body would be read as text it is not (a gzip body as "not valid UTF-8", a body merely labelled so
  // as plain JSON): the console decodes no content coding, and says so (RFC 9110 §15.5.16, RFC 7694).
  const encoding = request.headers.get("content-encoding");
  if (encoding !== null && !/^\s*identity\s*$/i.test(encoding)) {
    throw new ApiError(
      "unsupported_media_type",
      `The body is sent with \`Content-Encoding: ${encoding.slice(0, 40)}\`, which this console does not decode; send the JSON uncompressed.`,
      undefined,
      { "Accept-Encoding": "identity" },
    );
  }
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw new ApiError("payload_too_large", `The body is over ${MAX_BODY_BYTES / 1024} KiB.`);
  const reader = request.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (reader) {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        // The body stream fails only when the connection does: an abort or reset mid-body.
        throw new ClientClosedRequest(error);
      }
      const { done, value } = chunk;
      if (done) break;
      size += value.byteLength;
      if (size > MAX_BODY_BYTES) {
        await reader.cancel();
        throw new ApiError("payload_too_large", `The body is over ${MAX_BODY_BYTES / 1024} KiB.`);
      }
      chunks.push(value);
    }
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new ApiError("bad_request", "The body is not valid UTF-8.");
  }
  if (text.trim() === "") throw new ApiError("bad_request", "The body is empty; send a JSON object.");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError("bad_request", "The body is not valid JSON.");
  }
}

function queryObject(url: URL): Record<string, string> {
  // No prototype: `constructor`, `toString` or `__proto__` are parameter names like any other (and unknown ones).
  const out = Object.create(null) as Record<string, string>;
  for (const [key, value] of url.searchParams) {
    if (Object.hasOwn(out, key)) throw new ApiError("bad_request", `Query parameter \`${key.slice(0, 40)}\` is given more than once.`);
    out[key] = value;
  }
  return out;
}

/** A route without a query schema takes no query parameters: one given anyway is a mistake said back, not ignored. */
function noQuery<Q>(url: URL, name: string): Q {
  const keys = [...new Set(url.searchParams.keys())];
  if (keys.length > 0) {
    const shown = keys.slice(0, 3).map((k) => `\`${k.slice(0, 40)}\``).join(", ");
    throw new ApiError("bad_request", `${name.replace(/^[A-Z]+ /, "")} takes no query parameters (got ${shown}${keys.length > 3 ? ", …" : ""}).`);
  }
  return undefined as Q;
}

async function readParams(context: NextContext | undefined): Promise<Record<string, string>> {
  const raw = (context ? await context.params : undefined) ?? {};
  const out: Record<string, string> = {};
  // Next.js hands dynamic segments over already percent-decoded, once: decoding again would turn the key
  // `lock:a%2Fb` into the different key `lock:a/b`. Broken encodings never get here: the launcher answers
  // them with 400 (lib/request-guard.ts).
  for (const [key, value] of Object.entries(raw)) {
    if (typeof value === "string") out[key] = value;
  }
  return out;
}

function parseWith<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new ApiError(where === "body" ? "unprocessable" : "bad_request", describeZodError(result.error, where));
  }
  return result.data;
}

/**
 * The one wrapper every route handler goes through: authentication, role and same-origin checks, zod
 * parsing of params, query and body, and error mapping. Handlers return a Response or a JSON value.
 */
export function route<P = undefined, Q = undefined, B = undefined>(
  spec: RouteSpec<P, Q, B>,
  handler: (ctx: RouteContext<P, Q, B>) => Promise<Response | object> | Response | object,
): (request: Request, context: NextContext) => Promise<Response> {
  return async (request, context) => {
    const started = performance.now();
    const requestId = randomUUID();
    let response: Response;
    let principal: Principal | null = null;
    try {
      // The proxy refuses other hosts before any route runs; checked here too for callers that bypass it.
      assertServedHost(request.headers);
      if (spec.access !== "probe") {
        principal = spec.access === "public" ? await safeAuthenticate(request.headers) : await authenticate(request.headers);
        if (spec.access !== "public") principal = requireRole(principal, spec.access);
      }
      if (MUTATING.has(request.method)) checkOrigin(request.headers, principal?.via ?? "none");
      // A write is audited under the name the script sent: one that cannot be recorded is refused, not replaced.
      if (spec.access === "operator" && MUTATING.has(request.method) && principal?.via === "bearer") {
        const problem = actorHeaderProblem(request.headers);
        if (problem) throw new ApiError("bad_request", problem);
      }
      const url = new URL(request.url);
      const params = parseWith(spec.params, await readParams(context), "path");
      const query = spec.query ? parseWith(spec.query, queryObject(url), "query") : noQuery<Q>(url, spec.name);
      const body = spec.body ? parseWith(spec.body, await readJsonBody(request), "body") : (undefined as B);
      const result = await handler({ request, params, query, body, principal, requestId });
      response = result instanceof Response ? result : Response.json(result, { headers: { "Cache-Control": "no-store" } });
    } catch (error) {
      if (error instanceof ApiError) {
        response = errorResponse(error, requestId);
      } else if (error instanceof ClientClosedRequest) {
        response = new Response(null, { status: CLIENT_CLOSED_STATUS, headers: { "X-Request-Id": requestId } });
      } else {
        getLogger().error({ err: error, requestId, route: spec.name }, "unhandled error in route");
        response = Response.json(
          { error: { code: "internal", message: `Something went wrong on the server (request ${requestId}); the details are in its log.` } },
          { status: 500, headers: { "Cache-Control": "no-store", "X-Request-Id": requestId } },
        );
      }
    }
    const seconds = (performance.now() - started) / 1000;
    observeHttpRequest(spec.name, request.method, response.status, seconds);
    const streaming = response.headers.get("content-type")?.startsWith("text/event-stream") ?? false;
    getLogger().info(
      { requestId, method: request.method, route: spec.name, status: response.status, ms: Math.round(seconds * 1000), role: principal?.role, streaming },
      "request",
    );
    // The proxy sets these too, but requests with a body skip it (proxy.ts): every route answer carries them.
    try {
      setSecurityHeaders(response.headers, { https: getConfig().publicOrigin?.startsWith("https:") ?? false });
    } catch {
      // a handler returned a Response with immutable headers: the proxy's copy of the headers stands
    }
    return response;
  };
}

/**
 * Public routes work without credentials, so a wrong token there is ignored rather than refused; except
 * that a guesser over the limit is still told to wait.
 */
async function safeAuthenticate(headers: Headers): Promise<Principal | null> {
  try {
    return await authenticate(headers);
  } catch (error) {
    if (error instanceof ApiError && error.code === "rate_limited") throw error;
    return null;
  }
}
