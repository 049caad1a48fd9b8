import "server-only";
import { brand, instanceOf } from "./global";

/** The closed set of error codes, each mapped to one HTTP status. */
export const ERROR_STATUS = Object.freeze({
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  misdirected_request: 421,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  rate_limited: 429,
  unavailable: 503,
} as const);

export type ErrorCode = keyof typeof ERROR_STATUS;

/** An error whose message a person can act on; anything else becomes a generic 500. */
export class ApiError extends Error {
  static readonly [brand] = "ApiError";
  static override [Symbol.hasInstance](value: unknown): value is ApiError {
    return instanceOf(this, value);
  }

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "ApiError";
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * How ioredis's cluster client begins its error for a command it tried `maxRedirections` times (after MOVED,
 * CLUSTERDOWN, a dropped connection) whose last try got a reply error: that reply's text follows (ioredis
 * `Cluster.handleError`; the engine's `isNoScript` knows the same form).
 */
const CLUSTER_TRIES_SPENT = "Too many Cluster redirections. Last error: ReplyError: ";

/**
 * The node's reply in an error's text: the text itself, or the reply a cluster client reports after its tries
 * (only that exact prefix at the start, so a text that merely mentions a reply is not taken for it).
 */
export function replyText(raw: string): string {
  return raw.startsWith(CLUSTER_TRIES_SPENT) ? raw.slice(CLUSTER_TRIES_SPENT.length) : raw;
}

/** The node's reply when `error` is a reply error, also one a cluster client reports after its tries; else null. */
export function replyOf(error: unknown): string | null {
  if (!(error instanceof Error)) return null;
  if (error.name === "ReplyError") return error.message;
  const reply = replyText(error.message);
  return reply === error.message ? null : reply;
}

/**
 * A lock node's failure (the Redis client's or the server's error text) in words a viewer can act on, without
 * the client's internals; null when it is none of the kinds known here (the caller says it in its own words).
 */
export function nodeFailureText(raw: string | undefined): string | null {
  if (raw === undefined || raw === "no answer" || /did not answer within|^no answer within|Command timed out/.test(raw)) return "did not answer in time";
  if (/ECONNREFUSED|ECONNRESET|Connection is closed|Stream isn't writeable|enableOfflineQueue/i.test(raw)) return "not reachable";
  const reply = replyText(raw);
  if (/^NOAUTH|^WRONGPASS/.test(reply)) return "refused the console's credentials";
  // The credentials were accepted; the user's ACL rules leave out the command or a key (7.2 words it in a script as ERR).
  if (/^NOPERM|^ERR ACL failure/.test(reply)) return "refused by its ACL: the console's Redis user may not run this command or use this key there";
  // Redis refuses every write on a replica before it is made (in a script, at its first write: nothing before it).
  if (/^READONLY/.test(reply)) return "is a read-only replica now, demoted by a failover or named so by its URL: nothing was written there";
  // A command renamed or disabled on the server (`rename-command`, as managed services do): Redis refuses it before
  // running it. (Inside a script Redis words it "Unknown Redis command called from script", and the script may have
  // written before it: not this.) Only the command's name is said, never the arguments Redis repeats after it.
  const unknown = UNKNOWN_COMMAND.exec(reply);
  if (unknown) {
    const name = unknown[1] ?? "";
    const command = COMMAND_NAME.test(name) ? `the command \`${name.toUpperCase()}\`` : "a command the console sent";
    return `does not know ${command} (renamed or disabled there, as some managed services do), so it did not run there`;
  }
  return null;
}

/** Redis's reply to a command it does not know: `'name'` (Redis 7) or `` `name` `` (Redis 6), then maybe the echoed arguments. */
const UNKNOWN_COMMAND = /^ERR unknown command ['`]([^'`\r\n]*)['`]/;

/** A command name as Redis commands are named (`XADD`, `EVALSHA`, `CLIENT|LIST`): nothing else is repeated. */
const COMMAND_NAME = /^[A-Za-z][A-Za-z0-9_|.-]{0,39}$/;

/**
 * Whether a node's error is its ACL refusing the console's Redis user the key (`NOPERM`, which Redis answers before
 * the command or script runs: nothing was done there), also as a cluster client reports it after its tries. Not
 * the credentials, which the node accepted.
 */
export function refusesKey(error: string | undefined): boolean {
  return error !== undefined && /^NOPERM\b.*\bkeys?\b/i.test(replyText(error));
}
