import "server-only";
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { makeDirs } from "@/lib/make-dirs";
import { MAKE_SECRET, MIN_SECRET_LENGTH, weakSecretProblem } from "@/lib/secret-strength";
import path from "node:path";
import { jwtVerify, SignJWT, type JWTPayload } from "jose";
import { isAllowedOrigin } from "@/lib/host-rules";
import { getConfig } from "./config";
import { tightenDataFile } from "./data-file-mode";
import { ApiError } from "./errors";
import { singleton } from "./global";
import { getHostRules } from "./host-check";
import { getLogger } from "./logger";
import { getSessionRevocations } from "./session-revocation";
import { getWrongTokenLimiter } from "./wrong-token-limiter";

export type Role = "viewer" | "operator";

export interface Principal {
  role: Role;
  /** Who acts, for the audit log: a name given at sign-in or in `X-Lockscope-Actor`, else the role. */
  actor: string;
  via: "bearer" | "session" | "open";
  /** For a session cookie: its id and expiry (epoch ms), so that signing out can revoke it. */
  session?: { id: string; expiresAtMs: number };
}

export const SESSION_COOKIE = "lockscope_session";
/**
 * The session cookie's name where the console is reached over https (`LOCKSCOPE_PUBLIC_ORIGIN=https://…`): a
 * browser takes a `__Host-` cookie only from this very host, `Secure`, for `/` and without `Domain`, so another
 * site of the parent domain cannot plant one (a session of its own, to have an operator act as it) or shadow it.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;

/** Whether the console is reached over https, so its cookies are `Secure` and the session's is `SECURE_SESSION_COOKIE`. */
export function cookiesSecure(): boolean {
  return getConfig().publicOrigin?.startsWith("https:") ?? false;
}

const sessionCookieName = (secure: boolean) => (secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE);
export const SESSION_TTL_SECONDS = 12 * 60 * 60;
export const CLIENT_IP_HEADER = "x-lockscope-client-ip";

interface Secrets {
  operatorToken: string;
  viewerToken: string | null;
  sessionSecret: Buffer;
  /** True when the operator token was generated on this start (the launcher prints it once). */
  generated: boolean;
  operatorTokenFile: string;
}

function readOrCreateSecretFile(file: string, make: () => string): { value: string; created: boolean } {
  tightenDataFile(file);
  try {
    const value = readFileSync(file, "utf8").trim();
    if (value.length >= 16) return { value, created: false };
  } catch {
    // absent: create below
  }
  makeDirs(path.dirname(file), 0o700);
  const value = make();
  writeFileSync(file, `${value}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { value, created: true };
}

/**
 * The session key kept in the data folder: generated there (32 random bytes) when absent or empty. One written
 * there by hand must be as random as one set in `LOCKSCOPE_SESSION_SECRET`: whoever guesses it makes a session
 * cookie for any role. A weak one stops the start, naming the file and how to make a good one, never the value.
 */
function sessionSecretFromFile(file: string): string {
  tightenDataFile(file);
  let kept = "";
  try {
    kept = readFileSync(file, "utf8").trim();
  } catch {
    // absent: generated below
  }
  if (kept === "") return readOrCreateSecretFile(file, () => randomBytes(32).toString("base64url")).value;
  const problem = weakSecretProblem(kept);
  if (problem !== null) {
    throw new Error(
      `the session secret in ${file} is too weak to sign session cookies (${problem}): expected a random secret of at least ${MIN_SECRET_LENGTH} characters, as random as ${MIN_SECRET_LENGTH} bytes; replace it with one made by \`${MAKE_SECRET} > ${file}\`, or delete the file and the console generates one`,
    );
  }
  return kept;
}

/** Tokens and the session key; a missing operator token is generated once and kept with mode 0600. */
export function getSecrets(): Secrets {
  return singleton("secrets", (): Secrets => {
    const config = getConfig();
    const operatorTokenFile = path.resolve(config.dataDir, "operator-token");
    let operatorToken = config.operatorToken;
    let generated = false;
    if (!operatorToken) {
      const result = readOrCreateSecretFile(operatorTokenFile, () => `lsop_${randomBytes(24).toString("base64url")}`);
      operatorToken = result.value;
      generated = result.created;
    }
    const sessionSecret = Buffer.from(config.sessionSecret ?? sessionSecretFromFile(path.resolve(config.dataDir, "session-secret")), "utf8");
    return { operatorToken, viewerToken: config.viewerToken, sessionSecret, generated, operatorTokenFile };
  });
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** Constant-time comparison: both sides are hashed first so their lengths never leak either. */
export function tokensEqual(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** Which role a presented token grants, compared in constant time against every configured token. */
export function roleForToken(token: string): Role | null {
  const { operatorToken, viewerToken } = getSecrets();
  const isOperator = tokensEqual(token, operatorToken);
  const isViewer = viewerToken !== null && tokensEqual(token, viewerToken);
  if (isOperator) return "operator";
  if (isViewer) return "viewer";
  return null;
}

/**
 * Sessions name the token they were made from, so rotating a token ends its sessions. Keyed with the session
 * secret: a cookie's payload is signed, not encrypted, and a plain hash of the token in it would let whoever
 * reads a cookie (a copy signed out long ago included) test guesses of the token offline.
 */
function tokenFingerprint(role: Role): string {
  const { operatorToken, viewerToken, sessionSecret } = getSecrets();
  const token = role === "operator" ? operatorToken : (viewerToken ?? "open");
  return createHmac("sha256", sessionSecret).update(`session-token:${token}`).digest().subarray(0, 8).toString("base64url");
}

const SESSION_ID = /^[A-Za-z0-9_-]{22}$/;
const SESSION_ALG = "HS256";

/**
 * A session cookie is a JWS (compact, HS256 keyed with the session secret): `r` role, `a` actor, `f` the
 * fingerprint of the token it was made from, `jti` the session id signing out revokes, `exp` its expiry.
 * jose verifies the MAC in constant time (Web Crypto) and refuses other algorithms, so `alg: none` or a
 * header naming another key type cannot get a cookie accepted.
 */
export async function createSessionCookieValue(role: Role, actor: string, nowMs = Date.now()): Promise<string> {
  const issuedAt = Math.floor(nowMs / 1000);
  return new SignJWT({ r: role, a: actor, f: tokenFingerprint(role) })
    .setProtectedHeader({ alg: SESSION_ALG })
    .setJti(randomBytes(16).toString("base64url"))
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + SESSION_TTL_SECONDS)
    .sign(getSecrets().sessionSecret);
}

export async function verifySessionCookieValue(value: string, nowMs = Date.now()): Promise<Principal | null> {
  if (value.length > 2048) return null;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(value, getSecrets().sessionSecret, { algorithms: [SESSION_ALG], currentDate: new Date(nowMs) }));
  } catch {
    // Malformed, tampered, signed with another secret or expired: all mean "no session".
    return null;
  }
  const role = payload.r;
  if (role !== "operator" && role !== "viewer") return null;
  // jose checks `exp` only when present: a cookie without one would never end.
  if (typeof payload.exp !== "number") return null;
  if (payload.f !== tokenFingerprint(role)) return null;
  // A cookie without an id could never be signed out: not accepted.
  if (typeof payload.jti !== "string" || !SESSION_ID.test(payload.jti)) return null;
  return {
    role,
    actor: typeof payload.a === "string" ? payload.a : role,
    via: "session",
    session: { id: payload.jti, expiresAtMs: payload.exp * 1000 },
  };
}

export function sessionCookieHeader(value: string, secure: boolean): string {
  return [
    `${sessionCookieName(secure)}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    `Max-Age=${SESSION_TTL_SECONDS}`,
    ...(secure ? ["Secure"] : []),
  ].join("; ");
}

/** The Set-Cookie values that clear the session cookie (over https, also the plain-named one older versions set). */
export function clearSessionCookieHeaders(secure: boolean): string[] {
  const clear = (name: string) => [`${name}=`, "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=0", ...(secure ? ["Secure"] : [])].join("; ");
  return secure ? [clear(SECURE_SESSION_COOKIE), clear(SESSION_COOKIE)] : [clear(SESSION_COOKIE)];
}

const ACTOR_RE = /^[\p{L}\p{N} ._@-]{1,64}$/u;

/** Whether `name` can name an actor in the audit log (letters, digits, spaces and . _ @ -, up to 64), once trimmed; blank means none. */
export const actorNameAllowed = (name: string): boolean => name.trim() === "" || ACTOR_RE.test(name.trim());

const ASCII_ONLY = /^[\x00-\x7f]*$/;
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/**
 * `X-Lockscope-Actor` as its sender wrote it. HTTP carries a header's value as bytes, which Node.js reads one
 * character per byte (Latin-1), while curl, Python's requests and most clients send text as UTF-8: `Jürgen` arrives
 * as `JÃ¼rgen`, and `Zoë` as `ZoÃ«`, which is no name. Bytes that form UTF-8 are read as UTF-8; others (a client that
 * sends Latin-1, as HTTP allows) stay as they came.
 */
export function actorHeader(headers: Headers): string | null {
  const raw = headers.get("x-lockscope-actor");
  if (raw === null || ASCII_ONLY.test(raw)) return raw;
  const bytes = Buffer.from(raw, "latin1");
  // (A value with a character past U+00FF did not come from the wire's bytes: it is taken as it is.)
  if (bytes.toString("latin1") !== raw) return raw;
  try {
    return utf8Strict.decode(bytes);
  } catch {
    return raw;
  }
}

/**
 * Why a write's `X-Lockscope-Actor` cannot name its sender in the audit log (null when it can, or is absent or
 * blank, which means the role's name as at sign-in): a write is refused rather than audited under another name.
 */
export function actorHeaderProblem(headers: Headers): string | null {
  const name = actorHeader(headers);
  if (name === null || actorNameAllowed(name)) return null;
  const trimmed = name.trim();
  const what = [...trimmed].length > 64 ? `it is ${[...trimmed].length} characters long` : "it has other characters";
  return `The X-Lockscope-Actor header must be a name of 1 to 64 letters, digits, spaces and . _ @ - (it names you in the audit log), and ${what}. Send such a name, or leave the header out to be recorded under your role's name; nothing was done.`;
}

/** A display name for the audit log; anything unprintable or too long falls back to the role (reads are lenient). */
export function cleanActor(name: string | null | undefined, role: Role): string {
  const trimmed = (name ?? "").trim();
  return ACTOR_RE.test(trimmed) ? `${trimmed}` : role;
}

/** At most this many cookies of one name are read from a request (each costs a signature check). */
const MAX_SESSION_COOKIES = 4;

/**
 * Every value of the cookie `name`, in the order sent. A browser sends two of one name when another site of
 * the parent domain set one for the whole domain (or an older path's cookie is left): the console's own
 * comes in any position.
 */
function readCookies(header: string | null, name: string): string[] {
  const values: string[] = [];
  if (!header) return values;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) values.push(part.slice(eq + 1).trim());
    if (values.length === MAX_SESSION_COOKIES) break;
  }
  return values;
}

/**
 * The sessions the request's session cookies name, those whose signature, role, token fingerprint and expiry
 * are good, whether or not they were signed out and whatever other credentials came along: what signing out
 * or in again must revoke, every one of them.
 */
export async function carriedSessions(headers: Headers): Promise<Principal[]> {
  const sessions = await Promise.all(readCookies(headers.get("cookie"), sessionCookieName(cookiesSecure())).map((value) => verifySessionCookieValue(value)));
  return sessions.filter((s): s is Principal => s !== null);
}

/**
 * Who is asking. A bearer token wins over a cookie; a wrong bearer token is a 401 (429 once the address
 * has sent too many; never silently downgraded to the open viewer). A signed-out session counts as no
 * session; two different live ones are a 401 (see below). Without credentials, reading is open only when no
 * viewer token is set.
 */
export async function authenticate(headers: Headers): Promise<Principal | null> {
  const authorization = headers.get("authorization");
  // Only `Bearer` carries the console's tokens. Another scheme is someone else's credential, not a wrong token:
  // a proxy in front that checks Basic credentials (nginx's auth_basic) passes the browser's `Authorization: Basic …`
  // on with every request, and refusing it would sign every browser out. It is read as no credentials.
  if (authorization !== null && /^Bearer(?:\s|$)/i.test(authorization.trim())) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match?.[1]) throw new ApiError("unauthorized", "The Authorization header must be `Bearer <token>`.", undefined, BEARER_CHALLENGE);
    const role = await checkPresentedToken(match[1], clientIp(headers), "bearer");
    return { role, actor: cleanActor(actorHeader(headers), role), via: "bearer" };
  }
  // The session cookie that is good and not signed out: one a sibling site set for the parent domain (signed out
  // by a later sign-in here), sent before the console's own, must not hide it.
  const live = new Map<string, Principal>();
  for (const principal of await carriedSessions(headers)) {
    if (principal.session && !(await getSessionRevocations().isRevoked(principal.session.id))) live.set(principal.session.id, principal);
  }
  // Two live ones: over http another site of the parent domain can set `lockscope_session` for the whole domain
  // (a session of its own, taken with a token it holds), and the browser may send it first. Reading either would
  // have the user act as someone else, unaware; the console sets one cookie per host, so two are never its own.
  if (live.size > 1) {
    throw new ApiError(
      "unauthorized",
      "This browser sent two different sessions of this console (another site of the same parent domain can set one over http): sign in again, which ends both. Serving the console over https (LOCKSCOPE_PUBLIC_ORIGIN=https://…) keeps other sites from setting its cookie.",
      undefined,
      { ...BEARER_CHALLENGE },
    );
  }
  const [principal] = live.values();
  if (principal) return principal;
  if (getSecrets().viewerToken === null) return { role: "viewer", actor: "anonymous", via: "open" };
  return null;
}

/**
 * The role a presented token (bearer or sign-in) grants, or 401 for a wrong one. A correct token is always
 * accepted, whatever its address sent before: a guesser behind the same address (or the same proxy) must
 * not lock the operator out. Wrong tokens are counted per address and token fingerprint, and from all addresses
 * together, on the lock nodes for every console (server/wrong-token-limiter.ts); past either limit, they get 429
 * with `Retry-After`.
 */
export async function checkPresentedToken(token: string, ip: string, via: "bearer" | "sign-in"): Promise<Role> {
  const role = roleForToken(token);
  if (role) return role;
  // The scrape token is counted like any other token that grants nothing here: its own message says which token
  // it is, so uncounted it would let a guesser try METRICS_TOKEN candidates here without limit.
  const metricsToken = getConfig().metricsToken;
  const message =
    metricsToken !== null && tokensEqual(token, metricsToken)
      ? "METRICS_TOKEN is only for scraping /metrics; use the operator or viewer token here."
      : via === "bearer"
        ? "The bearer token is not valid."
        : "That token is not valid for this console.";
  // Every 401 names the scheme to authenticate with (RFC 9110), the sign-in form's too.
  return refuseWrongToken(token, ip, via, message, BEARER_CHALLENGE);
}

/**
 * Counts a wrong token from `ip` (server/wrong-token-limiter.ts) and throws: 429 with `Retry-After` once the
 * address, or all addresses together, are past their limit, else 401 with `message` and `challenge`. Shared by the API and /metrics, so
 * guesses at either count against the same limit.
 */
export async function refuseWrongToken(token: string, ip: string, via: "bearer" | "sign-in" | "metrics", message: string, challenge: Readonly<Record<string, string>>): Promise<never> {
  const { retryAfterSeconds: wait, limit, crossed } = await getWrongTokenLimiter().fail(ip, wrongTokenFingerprint(token));
  if (crossed === "address") getLogger().warn({ ip, via, action: "wrong-token", outcome: "limited" }, "too many wrong tokens from one address");
  if (crossed === "everyone") getLogger().warn({ ip, via, action: "wrong-token", outcome: "limited-everyone" }, "too many wrong tokens from all addresses together: every wrong token is refused for the rest of the minute");
  if (wait > 0) {
    const message =
      limit === "everyone"
        ? `Too many wrong tokens from many addresses together: every wrong token is refused for now; try again in ${wait} s (a right token still works).`
        : `Too many wrong tokens from this address; try again in ${wait} s.`;
    throw new ApiError("rate_limited", message, undefined, { "Retry-After": String(wait) });
  }
  throw new ApiError("unauthorized", message, undefined, { ...challenge });
}

/** Tells wrong tokens apart without keeping them: a keyed hash, truncated. */
function wrongTokenFingerprint(token: string): string {
  return createHmac("sha256", getSecrets().sessionSecret).update(`wrong-token:${token}`).digest().subarray(0, 8).toString("base64url");
}

/** What a 401 tells a client to send (RFC 6750). */
export const BEARER_CHALLENGE = Object.freeze({ "WWW-Authenticate": 'Bearer realm="lockscope"' });

/** Throws 401/403 unless the principal may act with `needed`. */
export function requireRole(principal: Principal | null, needed: Role): Principal {
  if (!principal) {
    throw new ApiError("unauthorized", "Sign in on /login or send `Authorization: Bearer <token>`.", undefined, {
      ...BEARER_CHALLENGE,
    });
  }
  if (needed === "operator" && principal.role !== "operator") {
    if (principal.via === "open") {
      throw new ApiError("unauthorized", "This needs the operator role: sign in on /login or send the operator's bearer token.", undefined, {
        ...BEARER_CHALLENGE,
      });
    }
    throw new ApiError("forbidden", "This needs the operator role; you are signed in as a viewer.");
  }
  return principal;
}

/**
 * Browsers send `Origin` on every mutating request; it must be one of the console's own origins (its
 * configured and local host names, see `server/host-check.ts`), never one derived from the request's Host,
 * which DNS rebinding controls. A request without `Origin` is a script's (curl), accepted only with a
 * bearer token, never on a cookie alone.
 */
export function checkOrigin(headers: Headers, via: Principal["via"] | "none"): void {
  const origin = headers.get("origin");
  if (origin === null) {
    if (via === "session") throw new ApiError("forbidden", "A browser request that changes something must carry this console's Origin header.");
    return;
  }
  if (!isAllowedOrigin(getHostRules(), origin)) {
    throw new ApiError(
      "forbidden",
      `Cross-origin request refused: Origin ${origin.slice(0, 100)} is not this console (behind a proxy or a port mapping, set LOCKSCOPE_PUBLIC_ORIGIN).`,
    );
  }
}

export function clientIp(headers: Headers): string {
  return headers.get(CLIENT_IP_HEADER) ?? "unknown";
}
