import "server-only";

/** Node.js socket errors that say the server could not be reached or went away, not that it refused a statement. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE"]);

/**
 * SQLSTATEs of a server that is going away or not yet taking work: class 08 (connection exception),
 * `57P01`–`57P03` (shut down by the administrator, crashed, starting up or shutting down) and `53300`
 * (too many connections).
 */
const UNAVAILABLE_STATES = /^(08...|57P0[123]|53300)$/;

/**
 * What node-postgres says when a connection fails or ends under a query, or when a server that took the
 * query answers nothing at all, not even its own statement timeout (its errors carry no code).
 */
const CONNECTION_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout)/;

/**
 * Whether a database error means "the database did not answer" (down, restarting, unreachable), as
 * opposed to "it answered and refused this" (a constraint, a schema it does not have, a bad value). Work
 * that failed for the first reason is worth keeping until the database is back; work refused is not.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as Error & { code?: unknown }).code;
    if (typeof code === "string" && (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.test(code))) return true;
    if (CONNECTION_MESSAGES.test(e.message)) return true;
    // Node.js reports a host name with several addresses that all refused as one AggregateError.
    if (e instanceof AggregateError && e.errors.some((inner) => isDatabaseUnreachable(inner))) return true;
  }
  return false;
}

/** A database error as the console's log keeps it: pg's messages name the server's complaint, never the connection's password. */
export function databaseErrorText(error: unknown): string {
  return error instanceof Error ? error.message.slice(0, 200) : String(error).slice(0, 200);
}

/**
 * How a failed read of the database is told to whoever asked (a viewer's page): whether the database did not answer
 * or refused the query, not its own words, which name its tables, columns and roles; the console's log has them.
 */
export function readFailure(error: unknown): string {
  return isDatabaseUnreachable(error) ? "did not answer" : "refused the query (the console's log has its error)";
}
