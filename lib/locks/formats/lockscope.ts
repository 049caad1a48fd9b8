import { decodeLockValue, forceRelease, isClusterClient } from "@lockscope/redlock";
import { formatReading, NO_STRING, stringValue } from "./common";
import { defineFormat, type FormatHolder, type NodeReleaseResult } from "./types";

/**
 * This engine's own values (`lk1:<id>:<acquiredAt>:<pid>:<fence>:<host>:<label>`, see lib/redlock/identity.ts),
 * decoded with the engine's public `decodeLockValue` so the layout has one owner. Force release goes through
 * the engine's `forceRelease`, which also revokes the holder (its `using()` signal aborts at once), advances the
 * fence and wakes the head waiter: the only format whose holder can hear about it (while it listens).
 */
/** How a release refused for a companion key's type ends its message (the console passes it on as is: it holds no Redis internals). */
export const COMPANION_REFUSED = "which the release would write: nothing was written";

export const lockscope = defineFormat({
  name: "lockscope",
  description: "Lockscope's own Redlock engine (lib/redlock): holder label, host, pid, fence and acquisition time in the value",
  redisTypes: ["string"],
  keyPatterns: [],
  // The engine's plain `acquireNaive` writes the same values on one node: where a value sits decides.
  scope: "inferred",
  contention: "engine",
  notify: ["$"],
  recognise: (_key, raw) => raw.type === "string" && decodeLockValue(raw.value) !== null,
  decode(_key, reading) {
    const { value, truncated } = stringValue(reading) ?? NO_STRING;
    const identity = decodeLockValue(value);
    const holder: FormatHolder = { id: value };
    if (identity?.label != null) holder.label = identity.label;
    if (identity?.host != null) holder.host = identity.host;
    if (identity?.pid != null) holder.pid = identity.pid;
    if (identity?.acquiredAt != null) holder.since = identity.acquiredAt;
    return formatReading("lockscope", "string", reading, {
      holders: [holder],
      fingerprint: value,
      truncated,
      fence: identity?.fence ?? null,
      acquiredAt: identity?.acquiredAt ?? null,
    });
  },
  async release(clients, resource, holderId, options) {
    const result = await forceRelease(clients, resource, { token: holderId, nodeTimeoutMs: options.nodeTimeoutMs });
    const nodes = result.nodes.map((n): NodeReleaseResult =>
      n.result === "error"
        ? { index: n.index, result: "error", error: n.error ?? "no answer" }
        : n.result === "wrong-type"
          ? // A companion key the release would write (the wait queue) has another type: nothing was written.
            { index: n.index, result: "error", error: `${n.detail ?? "a companion key has another type"}, ${COMPANION_REFUSED}` }
          : n.result === "not-string"
          ? // The engine's script refused a key of another type and touched nothing.
            { index: n.index, result: "wrongtype", redisType: null, woken: null }
          : { index: n.index, result: n.result, redisType: n.result === "absent" ? "none" : "string", woken: n.result === "deleted" ? (n.wakeHeardBy ?? 0) : null },
    );
    // The engine's script publishes the revocation, also on the holder's own engine instance's channel: told
    // when the holder's engine heard it there on some node (it listens while a using() routine holds the lock;
    // a plain acquire's holder finds out at its next extend or release). It wakes the head waiter: woken when
    // its engine heard it on some node (nobody queued: nobody woken). On a cluster a node counts only its own
    // subscribers and the engine listens through one node: a published revocation, or a queued waiter, is
    // taken as heard there.
    const deleted = nodes.some((n) => n.result === "deleted");
    const cluster = clients.some((c) => isClusterClient(c));
    const told = cluster ? deleted : result.nodes.some((n) => (n.holderHeardBy ?? 0) > 0);
    const woken = result.nodes.some((n) => (n.wakeHeardBy ?? 0) > 0 || (cluster && n.waiterQueued === true));
    return { nodes, notified: { holder: told, waiters: woken } };
  },
});
