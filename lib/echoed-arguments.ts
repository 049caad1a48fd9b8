/**
 * Redis repeats the first arguments of a command it does not know (`ERR unknown command 'publish', with args
 * beginning with: 'lockscope:revoked' '{"value":"<a lock token>"}'`; Redis 6 quotes them with backticks): a lock
 * token, a holder's value, a release's reason, a password sent with HELLO. The rest of the reply stays.
 */
const ECHOED_ARGUMENTS = /(with args beginning with:)[^\r\n]*/g;

/** An error's text without the command arguments Redis repeats in it (see `ECHOED_ARGUMENTS`). */
export function withoutArguments(text: string): string {
  return text.replace(ECHOED_ARGUMENTS, "$1 [redacted]");
}

/** An error's message (or a thrown value's text) without the arguments Redis repeats in it: for text users read. */
export function errorText(error: unknown): string {
  return withoutArguments(error instanceof Error ? error.message : String(error));
}
