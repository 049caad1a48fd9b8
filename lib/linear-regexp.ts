/**
 * A regular expression matched in time proportional to the text, for patterns an operator writes and texts
 * anyone who can write a key chooses (`METRICS_GROUP_PATTERN` against lock key names). JavaScript's own matcher
 * backtracks: `^lock:((a+)+)$` against `lock:aaaa…a!` tries 2^n ways, and the console's one thread is busy all
 * that while. V8 has a second, non-backtracking engine for the `l` flag (an automaton, as RE2), behind a flag of
 * its own; it refuses at compile time what it cannot run in linear time (backreferences, lookarounds).
 * Node.js only (`node:v8`).
 */
import v8 from "node:v8";

let enabled = false;

/** Thrown for a pattern the linear engine refuses (a backreference or a lookaround). */
export class NotLinearError extends Error {
  constructor(source: string) {
    super(`/${source.slice(0, 100)}/ uses a backreference or a lookaround, which cannot be matched in time proportional to the text`);
    this.name = "NotLinearError";
  }
}

/**
 * `source` compiled for V8's linear-time engine. Throws `SyntaxError` for a pattern that is not a regular
 * expression, `NotLinearError` for one that only a backtracking matcher can run. `flags` must not hold `l`.
 */
export function linearRegExp(source: string, flags = ""): RegExp {
  // The flag only lets the parser accept `l`: it changes nothing for other patterns, so turning it on in a
  // running process is safe (as the launcher sets its heap flags, scripts/start.ts).
  if (!enabled) {
    v8.setFlagsFromString("--enable-experimental-regexp-engine");
    enabled = true;
  }
  // A syntax error says so as JavaScript's parser does, before the engine is asked.
  new RegExp(source, flags);
  try {
    return new RegExp(source, `${flags}l`);
  } catch {
    throw new NotLinearError(source);
  }
}
