import "server-only";
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { singleton } from "./global";

export type Role = "viewer" | "operator";

export interface Principal {
  role: Role;
  /** Who acts, for the audit log: a name given at sign-in or in `X-Lockscope-Actor`, else the role. */
  actor: string;
  via: "bearer" | "session" | "open";
}

export const SESSION_COOKIE = "lockscope_session";
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
  try {
    const value = readFileSync(file, "utf8").trim();
    if (value.length >= 16) return { value, created: false };
  } catch {
    // absent: create below
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const value = make();
  writeFileSync(file, `${value}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { value, created: true };
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
    const sessionSecret = config.sessionSecret
      ? Buffer.from(config.sessionSecret, "utf8")
      : Buffer.from(readOrCreateSecretFile(path.resolve(config.dataDir, "session-secret"), () => randomBytes(32).toString("base64url")).value, "utf8");
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

/** Sessions name the token they were made from, so rotating a token ends its sessions. */
function tokenFingerprint(role: Role): string {
  const { operatorToken, viewerToken } = getSecrets();
  const token = role === "operator" ? operatorToken : (viewerToken ?? "open");
  return digest(`fingerprint:${token}`).subarray(0, 8).toString("base64url");
}

interface SessionPayload {
  r: Role;
  a: string;
  exp: number;
  f: string;
}

function sign(data: string): string {
  return createHmac("sha256", getSecrets().sessionSecret).update(data).digest("base64url");
}

export function createSessionCookieValue(role: Role, actor: string, nowMs = Date.now()): string {
  const payload: SessionPayload = { r: role, a: actor, exp: Math.floor(nowMs / 1000) + SESSION_TTL_SECONDS, f: tokenFingerprint(role) };
  const data = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${data}.${sign(data)}`;
}

export function verifySessionCookieValue(value: string, nowMs = Date.now()): Principal | null {
  const dot = value.indexOf(".");
  if (dot <= 0 || value.length > 2048) return null;
  const data = value.slice(0, dot);
  const mac = value.slice(dot + 1);
  if (!tokensEqual(mac, sign(data))) return null;
  try {
    const payload = JSON.parse(Buffer.from(data, "base64url").toString("utf8")) as Partial<SessionPayload>;
    if (payload.r !== "operator" && payload.r !== "viewer") return null;
    if (typeof payload.exp !== "number" || payload.exp * 1000 <= nowMs) return null;
    if (payload.f !== tokenFingerprint(payload.r)) return null;
    return { role: payload.r, actor: typeof payload.a === "string" ? payload.a : payload.r, via: "session" };
  } catch {
    return null;
  }
}

export function sessionCookieHeader(value: string, secure: boolean): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    `Max-Age=${SESSION_TTL_SECONDS}`,
    ...(secure ? ["Secure"] : []),
  ].join("; ");
}

export function clearSessionCookieHeader(secure: boolean): string {
  return [`${SESSION_COOKIE}=`, "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=0", ...(secure ? ["Secure"] : [])].join("; ");
}

const ACTOR_RE = /^[\p{L}\p{N} ._@-]{1,64}$/u;

/** A display name for the audit log; anything unprintable or too long falls back to the role. */
export function cleanActor(name: string | null | undefined, role: Role): string {
  const trimmed = (name ?? "").trim();
  return ACTOR_RE.test(trimmed) ? `${trimmed}` : role;
}

function readCookie(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/**
 * Who is asking. A bearer token wins over a cookie; a wrong bearer token is a 401 (never silently
 * downgraded to the open viewer). Without credentials, reading is open only when no viewer token is set.
 */
export function authenticate(headers: Headers): Principal | null {
  const authorization = headers.get("authorization");
  if (authorization !== null) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match?.[1]) throw new ApiError("unauthorized", "The Authorization header must be `Bearer <token>`.");
    const role = roleForToken(match[1]);
    if (!role) throw new ApiError("unauthorized", "The bearer token is not valid.");
    return { role, actor: cleanActor(headers.get("x-lockscope-actor"), role), via: "bearer" };
  }
  const cookie = readCookie(headers.get("cookie"), SESSION_COOKIE);
  if (cookie) {
    const principal = verifySessionCookieValue(cookie);
    if (principal) return principal;
  }
  if (getSecrets().viewerToken === null) return { role: "viewer", actor: "anonymous", via: "open" };
  return null;
}

/** Throws 401/403 unless the principal may act with `needed`. */
export function requireRole(principal: Principal | null, needed: Role): Principal {
  if (!principal) {
    throw new ApiError("unauthorized", "Sign in on /login or send `Authorization: Bearer <token>`.", undefined, {
      "WWW-Authenticate": 'Bearer realm="lockscope"',
    });
  }
  if (needed === "operator" && principal.role !== "operator") {
    if (principal.via === "open") {
      throw new ApiError("unauthorized", "This needs the operator role: sign in on /login or send the operator's bearer token.", undefined, {
        "WWW-Authenticate": 'Bearer realm="lockscope"',
      });
    }
    throw new ApiError("forbidden", "This needs the operator role; you are signed in as a viewer.");
  }
  return principal;
}

/** The console's own origin: the configured public origin, else the one the request was addressed to. */
export function ownOrigin(headers: Headers, requestUrl: string): string {
  const configured = getConfig().publicOrigin;
  if (configured) return configured;
  const host = headers.get("host");
  const url = new URL(requestUrl);
  return host ? `${url.protocol}//${host}` : url.origin;
}

/**
 * Browsers send `Origin` on every mutating request; it must be ours. A request without `Origin` is a
 * script's (curl), accepted only with a bearer token, never on a cookie alone.
 */
export function checkOrigin(headers: Headers, requestUrl: string, via: Principal["via"] | "none"): void {
  const origin = headers.get("origin");
  if (origin === null) {
    if (via === "session") throw new ApiError("forbidden", "A browser request that changes something must carry this console's Origin header.");
    return;
  }
  if (origin !== ownOrigin(headers, requestUrl)) {
    throw new ApiError("forbidden", `Cross-origin request refused: Origin ${origin.slice(0, 100)} is not this console.`);
  }
}

export function clientIp(headers: Headers): string {
  return headers.get(CLIENT_IP_HEADER) ?? "unknown";
}

/** Failed sign-ins per client address in a sliding window; in memory, per process. */
export class SignInLimiter {
  private readonly failures = new Map<string, number[]>();
  constructor(
    private readonly maxFailures = 5,
    private readonly windowMs = 60_000,
  ) {}

  /** Seconds to wait before trying again, or 0 when allowed. */
  retryAfterSeconds(ip: string, nowMs = Date.now()): number {
    const recent = (this.failures.get(ip) ?? []).filter((t) => nowMs - t < this.windowMs);
    if (recent.length === 0) this.failures.delete(ip);
    else this.failures.set(ip, recent);
    if (recent.length < this.maxFailures) return 0;
    return Math.max(1, Math.ceil(((recent[0] ?? nowMs) + this.windowMs - nowMs) / 1000));
  }

  fail(ip: string, nowMs = Date.now()): void {
    const list = this.failures.get(ip) ?? [];
    list.push(nowMs);
    this.failures.set(ip, list.slice(-this.maxFailures * 2));
    if (this.failures.size > 10_000) {
      const oldest = this.failures.keys().next().value;
      if (oldest !== undefined) this.failures.delete(oldest);
    }
  }

  succeed(ip: string): void {
    this.failures.delete(ip);
  }
}

export function getSignInLimiter(): SignInLimiter {
  return singleton("sign-in-limiter", () => new SignInLimiter());
}
