/**
 * `notify-keyspace-events` flags the live view needs: keyspace channel (K), generic commands such as DEL and
 * EXPIRE (g), string commands such as SET (`$`), expirations (x) and evictions (e). `A` stands for
 * "g$lshzxetd", so with it only K can be missing.
 */
export const REQUIRED_NOTIFY_FLAGS = ["K", "g", "$", "x", "e"] as const;

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
