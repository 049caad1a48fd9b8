import "server-only";
import {
  clearSessionCookieHeader,
  clientIp,
  cleanActor,
  createSessionCookieValue,
  getSecrets,
  getSignInLimiter,
  roleForToken,
  sessionCookieHeader,
  type Principal,
} from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { getLogger } from "./logger";

function isSecure(request: Request): boolean {
  const publicOrigin = getConfig().publicOrigin;
  return (publicOrigin ?? request.url).startsWith("https:");
}

/** What the browser's UI needs to know: the role decides which actions it shows. */
export function getSession(principal: Principal | null) {
  if (!principal) throw new ApiError("unauthorized", "Not signed in.");
  return { role: principal.role, actor: principal.actor, via: principal.via, viewerTokenRequired: getSecrets().viewerToken !== null };
}

export function signIn(request: Request, token: string, name: string | undefined): Response {
  const ip = clientIp(request.headers);
  const limiter = getSignInLimiter();
  const wait = limiter.retryAfterSeconds(ip);
  if (wait > 0) {
    throw new ApiError("rate_limited", `Too many failed sign-ins from this address; try again in ${wait} s.`, undefined, { "Retry-After": String(wait) });
  }
  const role = roleForToken(token);
  if (!role) {
    limiter.fail(ip);
    getLogger().warn({ ip, action: "sign-in", outcome: "refused" }, "operator action");
    throw new ApiError("unauthorized", "That token is not valid for this console.");
  }
  limiter.succeed(ip);
  const actor = cleanActor(name, role);
  getLogger().info({ ip, action: "sign-in", role, actor, outcome: "ok" }, "operator action");
  const value = createSessionCookieValue(role, actor);
  return Response.json(
    { role, actor },
    { headers: { "Set-Cookie": sessionCookieHeader(value, isSecure(request)), "Cache-Control": "no-store" } },
  );
}

export function signOut(request: Request): Response {
  return new Response(null, { status: 204, headers: { "Set-Cookie": clearSessionCookieHeader(isSecure(request)), "Cache-Control": "no-store" } });
}
