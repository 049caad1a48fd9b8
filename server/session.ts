import "server-only";
import {
  BEARER_CHALLENGE,
  carriedSessions,
  checkOrigin,
  checkPresentedToken,
  clearSessionCookieHeaders,
  cookiesSecure,
  clientIp,
  cleanActor,
  createSessionCookieValue,
  getSecrets,
  sessionCookieHeader,
  type Principal,
} from "./auth";
import { ApiError } from "./errors";
import { getLogger } from "./logger";
import { revokeSession } from "./session-revocation";


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
  const replaced = await carriedSessions(request.headers);
  await revokeAll(replaced);
  getLogger().info({ ip, action: "sign-in", role, actor, outcome: "ok", replacedSessions: replaced.length }, "operator action");
  const value = await createSessionCookieValue(role, actor);
  return Response.json(
    { role, actor },
    { headers: { "Set-Cookie": sessionCookieHeader(value, cookiesSecure()), "Cache-Control": "no-store" } },
  );
}

async function revokeAll(sessions: readonly Principal[]): Promise<void> {
  await Promise.all(sessions.flatMap(({ session }) => (session ? [revokeSession(session.id, session.expiresAtMs)] : [])));
}

/**
 * Clears the cookie and revokes the session it names: a copy of the cookie no longer works. The cookie is read
 * whatever else the request carries: a bearer token (which decides who is asking) must not leave it valid.
 */
export async function signOut(request: Request): Promise<Response> {
  const carried = await carriedSessions(request.headers);
  // Read here rather than by the route wrapper (which reads no credentials for sign-out): a browser's request
  // with the cookie must come from this console's own origin. One with an Authorization header is a script's
  // (a browser adds none to another site's request without asking the console first, which it refuses), and
  // may come without Origin, as on every other route.
  checkOrigin(request.headers, carried.length > 0 && !request.headers.has("authorization") ? "session" : "none");
  await revokeAll(carried);
  for (const { role, actor } of carried) getLogger().info({ ip: clientIp(request.headers), action: "sign-out", role, actor }, "operator action");
  const headers = new Headers({ "Cache-Control": "no-store" });
  for (const cookie of clearSessionCookieHeaders(cookiesSecure())) headers.append("Set-Cookie", cookie);
  return new Response(null, { status: 204, headers });
}
