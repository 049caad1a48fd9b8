import { CONFIG_VARIABLES } from "./config";

/** Set beside the console by the project's own tooling (`npm run screenshots`), and read there, not by the console. */
const TOOLING_VARIABLES: readonly string[] = ["LOCKSCOPE_SCREENSHOTS"];

/**
 * What Kubernetes puts in every pod's environment for each Service of its namespace, a Service named
 * `lockscope` (or `lockscope-redis`) giving `LOCKSCOPE_…` (`LOCKSCOPE_REDIS_…`) names: `<S>_SERVICE_HOST`,
 * `<S>_SERVICE_PORT`, `<S>_SERVICE_PORT_<port name>`, `<S>_PORT` and `<S>_PORT_<port>_<TCP|UDP|SCTP>[_PROTO|_PORT|_ADDR]`.
 */
const SERVICE_SUFFIX = /^_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT|PORT_\d+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)$/;

/** Edit distance (insertions, deletions, substitutions) between two names. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The known variable `name` most likely meant: the nearest by spelling, with or without the `LOCKSCOPE_` prefix. */
function closestKnown(name: string): string {
  const upper = name.toUpperCase();
  const bare = upper.replace(/^LOCKSCOPE_/, "");
  let best = CONFIG_VARIABLES[0]!;
  let bestDistance = Infinity;
  for (const known of CONFIG_VARIABLES) {
    const d = Math.min(distance(upper, known), distance(bare, known));
    if (d < bestDistance) [best, bestDistance] = [known, d];
  }
  return best;
}

/**
 * The variables without the `LOCKSCOPE_` prefix whose misspellings are named too: those long enough that a name a
 * letter or two away is a misspelling of one, not another program's variable (`HOST` and `PORT` are not).
 */
const SPELLED_OUT: readonly string[] = CONFIG_VARIABLES.filter((name) => !name.startsWith("LOCKSCOPE_") && name.length >= 9);

/**
 * The variable of `SPELLED_OUT` that `name` (not one the console reads) is a misspelling of, in any case: the nearest
 * within a letter for every five of its name (`LOG_LEVL`, `METRICS_TOKN`, `TRUSTED_PROXY`).
 */
function misspelled(name: string): string | undefined {
  const upper = name.toUpperCase();
  let meant: string | undefined;
  let nearest = Infinity;
  for (const known of SPELLED_OUT) {
    const d = distance(upper, known);
    if (d <= Math.floor(known.length / 5) && d < nearest) [meant, nearest] = [known, d];
  }
  return meant;
}

/**
 * The variables of `env` that the console does not read but look meant for it, each with the variable it most
 * likely stands for: every `LOCKSCOPE_…` one, and another spelled within a few letters of one it reads (`METRICS_TOKN`,
 * `lock_patterns`; see `misspelled`). Such a misspelling is otherwise ignored without a word, and leaves reading (`LOCKSCOPE_VIEWR_TOKEN`)
 * or the metrics (`METRICS_TOKN`) open. Kubernetes's service variables are not mistakes (see `SERVICE_SUFFIX`): they
 * are left out for the Service `lockscope`, and for any other Service whose `_SERVICE_HOST` is set. Names only: a
 * value may be a secret.
 */
export function unknownVariables(env: Readonly<Record<string, string | undefined>>): Array<{ name: string; closest: string }> {
  const names = Object.keys(env).filter((name) => env[name] !== undefined);
  const services = new Set(["LOCKSCOPE"]);
  for (const name of names) {
    const service = /^([A-Z0-9_]+)_SERVICE_HOST$/.exec(name)?.[1];
    if (service !== undefined) services.add(service);
  }
  const isServiceVariable = (name: string) => [...services].some((s) => name.startsWith(s) && SERVICE_SUFFIX.test(name.slice(s.length)));
  const unknown: Array<{ name: string; closest: string }> = [];
  for (const name of names) {
    if (CONFIG_VARIABLES.includes(name) || TOOLING_VARIABLES.includes(name) || isServiceVariable(name)) continue;
    if (/^LOCKSCOPE_/i.test(name)) unknown.push({ name, closest: closestKnown(name) });
    else {
      const meant = misspelled(name);
      if (meant !== undefined) unknown.push({ name, closest: meant });
    }
  }
  return unknown;
}
