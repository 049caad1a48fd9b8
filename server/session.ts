import "server-only";
import {
  BEARER_CHALLENGE,
  carriedSession,
  checkOrigin,
  checkPresentedToken,
  clearSessionCookieHeader,
  clientIp,
  cleanActor,
  createSessionCookieValue,
  getSecrets,
  sessionCookieHeader,
  type Principal,
} from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { getLogger } from "./logger";
import { revokeSession } from "./session-revocation";

function isSecure(request: Request): boolean {
  const publicOrigin = getConfig().publicOrigin;
  return (publicOrigin ?? request.url).startsWith("https:");
}

/** What the browser's UI needs to know: the role decides which actions it shows. */
export function getSession(principal: Principal | null) {
  if (!principal) throw new ApiError("unauthorized", "Not signed in.", undefined, BEARER_CHALLENGE);
  return { role: principal.role, actor: principal.actor, via: principal.via, viewerTokenRequired: getSecrets().viewerToken !== null };
}

export async function signIn(request: Request, token: string, name: string | undefined): Promise<Response> {
  const ip = clientIp(request.headers);
  let role: Principal["role"];
  try {
    role = await checkPresentedToken(token, ip, "sign-in");
  } catch (error) {
    getLogger().warn({ ip, action: "sign-in", outcome: "refused" }, "operator action");
    throw error;
  }
  const actor = cleanActor(name, role);
  // The session the browser still carries is replaced, so it is revoked (a copy of the old cookie, stolen or
  // planted before this sign-in, must not outlive it); a failed sign-in above leaves it as it was.
  const replaced = await carriedSession(request.headers);
  if (replaced?.session) await revokeSession(replaced.session.id, replaced.session.expiresAtMs);
  getLogger().info({ ip, action: "sign-in", role, actor, outcome: "ok", replacedSession: replaced !== null }, "operator action");
  const value = await createSessionCookieValue(role, actor);
  return Response.json(
    { role, actor },
    { headers: { "Set-Cookie": sessionCookieHeader(value, isSecure(request)), "Cache-Control": "no-store" } },
  );
}

/**
 * Clears the cookie and revokes the session it names: a copy of the cookie no longer works. The cookie is read
 * whatever else the request carries: a bearer token (which decides who is asking) must not leave it valid.
 */
export async function signOut(request: Request): Promise<Response> {
  const carried = await carriedSession(request.headers);
  // Read here rather than by the route wrapper (which reads no credentials for sign-out): a browser's request
  // with the cookie must come from this console's own origin.
  checkOrigin(request.headers, carried ? "session" : "none");
  if (carried?.session) {
    await revokeSession(carried.session.id, carried.session.expiresAtMs);
    getLogger().info({ ip: clientIp(request.headers), action: "sign-out", role: carried.role, actor: carried.actor }, "operator action");
  }
  return new Response(null, { status: 204, headers: { "Set-Cookie": clearSessionCookieHeader(isSecure(request)), "Cache-Control": "no-store" } });
}
