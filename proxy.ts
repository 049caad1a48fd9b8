import { randomBytes } from "node:crypto";
import { NextResponse, type NextRequest } from "next/server";
import { isApiPath, refuseBeforeRouting } from "@/lib/api-routes";
import { pageContentSecurityPolicy, setSecurityHeaders } from "@/lib/security-headers";
import { getConfig } from "@/server/config";
import { ApiError } from "@/server/errors";
import { assertServedHost } from "@/server/host-check";
import { noteRefusedRequest } from "@/server/refused-requests";

/**
 * Runs before every request Next.js serves (pages, routes, static files) that has no body: refuses host
 * names the console does not answer to (DNS rebinding), answers unknown API paths and methods in the JSON
 * error shape, and puts the security headers on every response, with a fresh script nonce for each page.
 */
export function proxy(request: NextRequest): Response {
  const api = isApiPath(request.nextUrl.pathname);
  try {
    assertServedHost(request.headers);
    if (api) {
      const answer = apiPrecheck(request);
      if (answer) return secured(answer, null);
    }
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    noteRefusedRequest({ method: request.method, status: error.status, code: error.code, host: request.headers.get("host") });
    return secured(errorJson(error), null);
  }
  if (api) return secured(NextResponse.next(), null);
  const nonce = randomBytes(16).toString("base64");
  const policy = pagePolicy(nonce);
  // Next.js reads the nonce from the request's policy and puts it on every script and style it renders.
  const requestHeaders = new Headers(request.headers);
  requestHeaders.set("content-security-policy", policy);
  requestHeaders.set("x-nonce", nonce);
  return secured(NextResponse.next({ request: { headers: requestHeaders } }), policy);
}

/** OPTIONS, unknown paths and methods a route does not serve; null when the route handler should answer. */
function apiPrecheck(request: NextRequest): Response | null {
  const refusal = refuseBeforeRouting(request.method, request.nextUrl.pathname);
  if (!refusal) return null;
  const allow: Record<string, string> = refusal.allow ? { Allow: refusal.allow } : {};
  if (refusal.code === null) return new Response(null, { status: 204, headers: { ...allow, "Cache-Control": "no-store" } });
  throw new ApiError(refusal.code, refusal.message, undefined, allow);
}

function errorJson(error: ApiError): Response {
  return Response.json(
    { error: { code: error.code, message: error.message } },
    { status: error.status, headers: { "Cache-Control": "no-store", ...(error.headers ?? {}) } },
  );
}

function pagePolicy(nonce: string): string {
  return pageContentSecurityPolicy({ nonce, development: process.env.NODE_ENV === "development", https: isHttps() });
}

function isHttps(): boolean {
  return getConfig().publicOrigin?.startsWith("https:") ?? false;
}

function secured(response: Response, pagePolicy: string | null): Response {
  setSecurityHeaders(response.headers, { ...(pagePolicy ? { pagePolicy } : {}), https: isHttps() });
  return response;
}

/**
 * Requests with a body skip the proxy: for a proxy, Next.js reads the whole body first and, when the
 * client hangs up mid-body, logs the abort as an error and answers 500 before any route runs. Those
 * requests are the routes' own POST/DELETE bodies: the route wrapper (`server/http.ts`) checks their Host
 * and sets the same headers, and the request-line guard answers unknown paths and methods for them.
 */
export const config = {
  matcher: [
    { source: "/:path*", missing: [{ type: "header", key: "content-length" }, { type: "header", key: "transfer-encoding" }] },
    { source: "/:path*", has: [{ type: "header", key: "content-length", value: "0" }] },
  ],
};
