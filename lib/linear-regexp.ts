/**
 * A regular expression that cannot backtrack without end, for patterns an operator writes and texts anyone who
 * can write a key chooses (`METRICS_GROUP_PATTERN` against lock key names). JavaScript's own matcher
 * backtracks: `^lock:((a+)+)$` against `lock:aaaa…a!` tries 2^n ways, and the console's one thread is busy all
 * that while. V8 has a second, non-backtracking engine (an automaton, as RE2), behind flags of its own; it
 * refuses at compile time what it cannot run in linear time (backreferences, lookarounds).
 *
 * The pattern is checked against that engine (refused if it cannot run it), and the expression returned is
 * V8's usual one, which moves to the linear engine once a match has backtracked too often (V8's
 * `--enable-experimental-regexp-engine-on-excessive-backtracks`): an ordinary key is matched by compiled code
 * (about 0.3 µs for the default pattern, against about 5 µs in the linear engine, on every lock change), and a
 * key built to stall it in time proportional to its length. Node.js only (`node:v8`).
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
 * `source` compiled so that no text makes it backtrack without end. Throws `SyntaxError` for a pattern that is
 * not a regular expression, `NotLinearError` for one that only a backtracking matcher can run. `flags` must not
 * hold `l`.
 */
export function linearRegExp(source: string, flags = ""): RegExp {
  // The flags only let the parser accept `l` and give a match that backtracks too often to the linear engine:
  // a pattern that never does runs as before, so turning them on in a running process is safe (as the launcher
  // sets its heap flags, scripts/start.ts). Set before the expression is made: its code is compiled with them.
  if (!enabled) {
    v8.setFlagsFromString("--enable-experimental-regexp-engine");
    v8.setFlagsFromString("--enable-experimental-regexp-engine-on-excessive-backtracks");
    enabled = true;
  }
  // A syntax error says so as JavaScript's parser does, before the engine is asked.
  const usual = new RegExp(source, flags);
  try {
    new RegExp(source, `${flags}l`);
  } catch {
    throw new NotLinearError(source);
  }
  return usual;
}
