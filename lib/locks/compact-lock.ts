import type { Lock, LockContention, LockNodeView } from "./types";

/**
 * A lock in the live stream's compact form (`GET /api/locks/stream?encoding=compact`, see docs/api.md): the same
 * fields as a `Lock`, by position rather than by name, and a node's value written `true` where it is the lock's
 * `token`. A change takes about half the bytes, and the bytes written are most of what each more tab costs.
 *
 * `[resource, deployment, state, format, redisType, scope, holders, warnings, token, leading, holder, fence, nodes,
 * quorumHeld, quorum, expiresAt, acquiredAt, ttlMs, endedAt, endedToken, unreadable, contention]`, where `nodes` is
 * `[[id, up, token, pttlMs], ...]` (`up` 1 or 0) and `contention` is `[attemptsPerMin, waiters, source, recent]`; a
 * field the lock leaves out is null (`unreadable`: 0), and `endedToken` counts only where `endedAt` is set.
 */
export type CompactLock = [
  resource: string,
  deployment: string,
  state: Lock["state"],
  format: Lock["format"],
  redisType: string,
  scope: Lock["scope"],
  holders: Lock["holders"],
  warnings: Lock["warnings"],
  token: string | null,
  leading: string | null,
  holder: Lock["holder"],
  fence: string | null,
  nodes: CompactNode[],
  quorumHeld: number,
  quorum: number,
  expiresAt: number | null,
  acquiredAt: number | null,
  ttlMs: number | null,
  endedAt: number | null,
  endedToken: string | null,
  unreadable: 0 | 1,
  contention: CompactContention,
];

/** A node's view of the lock: `token` true where it holds the lock's own `token`. */
type CompactNode = [id: string, up: 0 | 1, token: string | null | true, pttlMs: number | null];
type CompactContention = [attemptsPerMin: number | null, waiters: number | null, source: LockContention["source"], recent: number[] | null];

/** The lock's compact form (`lockFromCompact` gives the lock back, field for field). */
export function compactLock(lock: Lock): CompactLock {
  const token = lock.token;
  const nodes: CompactNode[] = lock.nodes.map((n) => [n.id, n.up ? 1 : 0, token !== null && n.token === token ? true : n.token, n.pttlMs]);
  const c = lock.contention;
  return [
    lock.resource,
    lock.deployment,
    lock.state,
    lock.format,
    lock.redisType,
    lock.scope,
    lock.holders,
    lock.warnings,
    token,
    lock.leading ?? null,
    lock.holder,
    lock.fence,
    nodes,
    lock.quorumHeld,
    lock.quorum,
    lock.expiresAt,
    lock.acquiredAt ?? null,
    lock.ttlMs,
    lock.endedAt ?? null,
    lock.endedAt === undefined ? null : (lock.endedToken ?? null),
    lock.unreadable ? 1 : 0,
    [c.attemptsPerMin, c.waiters, c.source, c.recent ?? null],
  ];
}

/** The lock a compact one stands for (see `compactLock`). */
export function lockFromCompact(sent: CompactLock): Lock {
  const [resource, deployment, state, format, redisType, scope, holders, warnings, token, leading, holder, fence, compactNodes, quorumHeld, quorum, expiresAt, acquiredAt, ttlMs, endedAt, endedToken, unreadable, c] = sent;
  const nodes: LockNodeView[] = compactNodes.map(([id, up, value, pttlMs]) => ({ id, up: up === 1, token: value === true ? token : value, pttlMs }));
  const contention: LockContention = { attemptsPerMin: c[0], waiters: c[1], source: c[2] };
  if (c[3] !== null) contention.recent = c[3];
  const lock: Lock = { resource, deployment, state, format, redisType, scope, holders, warnings, token, holder, fence, nodes, quorumHeld, quorum, expiresAt, ttlMs, contention };
  if (leading !== null) lock.leading = leading;
  if (acquiredAt !== null) lock.acquiredAt = acquiredAt;
  if (endedAt !== null) {
    lock.endedAt = endedAt;
    lock.endedToken = endedToken;
  }
  if (unreadable === 1) lock.unreadable = true;
  return lock;
}

/** A lock as the stream sends it: compact (`encoding=compact`), or the lock itself. */
export const lockOf = (sent: Lock | CompactLock): Lock => (Array.isArray(sent) ? lockFromCompact(sent) : sent);
