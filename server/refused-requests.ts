import "server-only";
import { getLogger } from "./logger";
import { counter, REFUSAL_CODES } from "./metrics";

export interface RefusedRequestNote {
  method: string | undefined;
  status: number;
  /** The error code of the answer (`misdirected_request`, `not_found`, …). */
  code: string;
  /** The Host header as sent (for a 421: the name a proxy or a rebinding page used). */
  host: string | null | undefined;
}

type RefusalCode = (typeof REFUSAL_CODES)[number];
const isRefusalCode = (code: string): code is RefusalCode => (REFUSAL_CODES as readonly string[]).includes(code);

/**
 * A request answered before any page or route ran (by the launcher's guard or the proxy): a Host the console
 * does not answer to, a request line, path or headers it cannot take. Routes count and log their own answers;
 * without this an operator whose proxy forwards the wrong host name, or a page trying DNS rebinding, saw nothing.
 * Counted by code (a closed set) and logged with the method, status and Host only: never the path or query (a
 * lock's name, a cursor), nor a header that can carry a credential.
 */
export function noteRefusedRequest(note: RefusedRequestNote): void {
  const code = isRefusalCode(note.code) ? note.code : "bad_request";
  counter("lockscope_http_refused_total", "Requests refused before any page or route ran, by error code (misdirected_request: a Host the console does not answer to).", ["code"]).inc({ code });
  getLogger().info(
    { method: (note.method ?? "").slice(0, 20), status: note.status, code, host: note.host === null || note.host === undefined ? null : note.host.slice(0, 100) },
    "request refused before routing",
  );
}
