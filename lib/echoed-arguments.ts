/**
 * Redis repeats the first arguments of a command it does not know (`ERR unknown command 'publish', with args
 * beginning with: 'lockscope:revoked' '{"value":"<a lock token>"}'`; Redis 6 quotes them with backticks): a lock
 * token, a holder's value, a release's reason, a password sent with HELLO. The rest of the reply stays.
 */
const ECHOED_ARGUMENTS = /(with args beginning with:)[^\r\n]*/g;

/** The whole echo, with the comma before it: for a sentence that names the command refused only. */
const ECHO_CLAUSE = /,?\s*with args beginning with:[^\r\n]*/g;

/**
 * An error's text without the command arguments Redis repeats in it (see `ECHOED_ARGUMENTS`): marked
 * "[redacted]", or with `drop`, the echo's whole clause left out (`ERR unknown command 'evalsha'`).
 */
export function withoutArguments(text: string, { drop = false }: { drop?: boolean } = {}): string {
  return drop ? text.replace(ECHO_CLAUSE, "") : text.replace(ECHOED_ARGUMENTS, "$1 [redacted]");
}

/** An error's message (or a thrown value's text) without the arguments Redis repeats in it: for text users read. */
export function errorText(error: unknown, options: { drop?: boolean } = {}): string {
  return withoutArguments(error instanceof Error ? error.message : String(error), options);
}
