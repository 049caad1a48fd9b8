import { notifyFlagsFor } from "./formats";

/**
 * `notify-keyspace-events` flags the live view needs: keyspace channel (K), generic commands such as DEL and
 * PEXPIRE (g), expirations (x) and evictions (e), plus each recognised format's type class (`$` strings, `h`
 * Redisson's hashes, `z` redis-semaphore's sorted sets). `A` stands for "g$lshzxetd", so with it only K can be
 * missing.
 */
export const REQUIRED_NOTIFY_FLAGS: readonly string[] = Object.freeze(notifyFlagsFor());

const ALIAS_A = "g$lshzxetd";

/** The flags to add to `current` (the node's setting) so the watcher sees every lock change; "" when none. */
export function missingNotifyFlags(current: string): string {
  const have = new Set(current.includes("A") ? [...current, ...ALIAS_A] : [...current]);
  return REQUIRED_NOTIFY_FLAGS.filter((flag) => !have.has(flag)).join("");
}

/** The node's flags with the missing ones added, keeping every flag it had. */
export function mergedNotifyFlags(current: string): string {
  return current + missingNotifyFlags(current);
}
