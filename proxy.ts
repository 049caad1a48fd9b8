import { randomBytes } from "node:crypto";
import { NextResponse, type NextRequest } from "next/server";
import { allowedMethods, isApiPath, matchApiRoute } from "@/lib/api-routes";
import { API_CONTENT_SECURITY_POLICY, BASE_SECURITY_HEADERS, HSTS_VALUE, pageContentSecurityPolicy } from "@/lib/security-headers";
import { getConfig } from "@/server/config";
import { ApiError } from "@/server/errors";
import { assertServedHost } from "@/server/host-check";

/**
 * Runs before every request Next.js serves (pages, routes, static files): refuses host names the console
 * does not answer to (DNS rebinding), answers unknown API paths and methods in the JSON error shape, and
 * puts the security headers on every response, with a fresh script nonce for each page.
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
  const route = matchApiRoute(request.nextUrl.pathname);
  if (!route) throw new ApiError("not_found", `There is no API route at ${request.nextUrl.pathname.slice(0, 200)}; the routes are listed in docs/api.md.`);
  const allow = allowedMethods(route);
  if (request.method === "OPTIONS") return new Response(null, { status: 204, headers: { Allow: allow.join(", "), "Cache-Control": "no-store" } });
  if (!allow.includes(request.method)) {
    throw new ApiError("method_not_allowed", `${route.pattern} does not answer ${request.method}; it answers ${allow.join(", ")}.`, undefined, {
      Allow: allow.join(", "),
    });
  }
  return null;
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

function secured(response: Response, pagePolicyValue: string | null): Response {
  for (const [name, value] of Object.entries(BASE_SECURITY_HEADERS)) response.headers.set(name, value);
  response.headers.set("Content-Security-Policy", pagePolicyValue ?? API_CONTENT_SECURITY_POLICY);
  if (isHttps()) response.headers.set("Strict-Transport-Security", HSTS_VALUE);
  return response;
}
