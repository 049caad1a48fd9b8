import "server-only";
import { appendFileSync, chmodSync, writeFileSync } from "node:fs";
import { makeDirs } from "@/lib/make-dirs";
import path from "node:path";
import { getConfig } from "./config";
import { readDataLines } from "./data-lines";
import { singleton } from "./global";
import { whenReady } from "./health";
import { getLogger } from "./logger";
import { getNodes, quorumOf, type LockNode } from "./nodes";

/** One key per signed-out session on every lock node, expiring with the session. Must not match LOCK_PATTERNS. */
export const REVOKED_SESSION_PREFIX = "lockscope:revoked-session:";

/**
 * How long a "not revoked" answer from the nodes is trusted before they are asked again. Another console's
 * sign-out reaches this one within this time; a session's requests cost one node read per interval.
 */
export const RECHECK_MS = 2_000;

const MAX_ENTRIES = 100_000;

/** Sign-outs told again to a node that reconnects are written this many at a time. */
const REPUBLISH_BATCH = 1_000;

/**
 * Signed-out sessions. A session cookie is signed, not stored, so signing out must remember its id until it
 * would have expired anyway. The list lives on the lock nodes (shared by every console over them, like
 * the audit stream), in this process, and in a file of the data folder (`file`, one JSON line per sign-out,
 * mode 0600): a node outage, a node restarted empty, or this console restarted over nodes that keep nothing
 * (the embedded ones) does not bring back a session this console revoked.
 */
export class SessionRevocations {
  /** Session id → expiry (epoch ms), for sessions revoked here or seen revoked on a node. */
  private readonly revoked = new Map<string, number>();
  /** Session id → when the nodes last said it was not revoked. */
  private readonly clearedAt = new Map<string, number>();
  private loaded = false;
  /** The node connections whose (re)connections this list follows (see `follow`). */
  private readonly followed = new WeakSet<object>();

  constructor(
    private readonly nodes: () => readonly LockNode[],
    private readonly timeoutMs: number,
    private readonly file: string | null = null,
  ) {}

  /** Revokes a session until `expiresAtMs`; resolves with how many nodes recorded it. */
  async revoke(id: string, expiresAtMs: number, nowMs = Date.now()): Promise<{ nodes: number; quorum: number }> {
    this.load(nowMs);
    this.follow();
    this.remember(id, expiresAtMs, nowMs);
    this.persist(id, expiresAtMs);
    const nodes = this.nodes();
    const acks = await Promise.all(
      nodes.map(async (node) => {
        try {
          if (!(await whenReady(node.client, this.timeoutMs))) return false;
          await node.client.set(`${REVOKED_SESSION_PREFIX}${id}`, "1", "PXAT", expiresAtMs);
          return true;
        } catch {
          return false;
        }
      }),
    );
    return { nodes: acks.filter(Boolean).length, quorum: quorumOf(nodes.length) };
  }

  /** Whether a session was signed out, here or on any console over the same nodes. */
  async isRevoked(id: string, nowMs = Date.now()): Promise<boolean> {
    this.load(nowMs);
    this.follow();
    const expiresAt = this.revoked.get(id);
    if (expiresAt !== undefined) {
      if (expiresAt > nowMs) return true;
      this.revoked.delete(id);
    }
    const cleared = this.clearedAt.get(id);
    if (cleared !== undefined && nowMs - cleared < RECHECK_MS) return false;
    // One node that has the key is enough: a node that missed the write, or lost it in a restart, must not
    // outvote it. A node that does not answer is skipped (not waited for), so a node outage costs nothing.
    const answers = await Promise.all(
      this.nodes().map(async (node) => {
        if (node.client.status !== "ready") return null;
        try {
          return await node.client.pttl(`${REVOKED_SESSION_PREFIX}${id}`);
        } catch {
          return null;
        }
      }),
    );
    const ttl = answers.find((a): a is number => a !== null && a > 0);
    if (ttl !== undefined) {
      this.remember(id, nowMs + ttl, nowMs);
      return true;
    }
    this.bounded(this.clearedAt, nowMs - RECHECK_MS);
    this.clearedAt.set(id, nowMs);
    return false;
  }

  /**
   * Tells each node, whenever its connection is (re)established, every sign-out this console knows of. A node
   * that was down when a session was signed out, or that came back empty from a restart, would otherwise let
   * the other consoles over it accept that session again until it expired (this console alone remembers).
   */
  private follow(): void {
    for (const node of this.nodes()) {
      if (this.followed.has(node.client)) continue;
      this.followed.add(node.client);
      node.client.on("ready", () => void this.republish(node));
      if (node.client.status === "ready") void this.republish(node);
    }
  }

  private async republish(node: LockNode, nowMs = Date.now()): Promise<void> {
    const live = [...this.revoked].filter(([, expiresAtMs]) => expiresAtMs > nowMs);
    for (let i = 0; i < live.length; i += REPUBLISH_BATCH) {
      try {
        await Promise.all(live.slice(i, i + REPUBLISH_BATCH).map(([id, expiresAtMs]) => node.client.set(`${REVOKED_SESSION_PREFIX}${id}`, "1", "PXAT", expiresAtMs)));
      } catch {
        return; // down again: its next reconnection tells it again
      }
    }
  }

  /** Reads the sign-outs kept in the file, once; those expired are left out of it. */
  private load(nowMs: number): void {
    if (this.loaded || this.file === null) return;
    this.loaded = true;
    const lines = readDataLines(this.file);
    const kept: string[] = [];
    for (const line of lines) {
      try {
        const { id, expiresAtMs } = JSON.parse(line) as { id?: unknown; expiresAtMs?: unknown };
        if (typeof id !== "string" || typeof expiresAtMs !== "number" || expiresAtMs <= nowMs) continue;
        this.remember(id, expiresAtMs, nowMs);
        kept.push(line);
      } catch {
        // a line cut short by a crash while it was written
      }
    }
    if (kept.length < lines.length) this.write(() => writeFileSync(this.file as string, kept.map((l) => `${l}\n`).join(""), { mode: 0o600 }));
  }

  private persist(id: string, expiresAtMs: number): void {
    if (this.file === null) return;
    const file = this.file;
    this.write(() => {
      makeDirs(path.dirname(file), 0o700);
      appendFileSync(file, `${JSON.stringify({ id, expiresAtMs })}\n`, { mode: 0o600 });
      chmodSync(file, 0o600);
    });
  }

  private write(action: () => void): void {
    try {
      action();
    } catch (error) {
      getLogger().warn({ action: "sign-out", file: this.file, err: error instanceof Error ? error.message : String(error) }, "could not keep sign-outs in the data folder: a restart over nodes that lost them accepts those sessions again");
    }
  }

  private remember(id: string, expiresAtMs: number, nowMs: number): void {
    this.clearedAt.delete(id);
    this.bounded(this.revoked, nowMs);
    this.revoked.set(id, expiresAtMs);
  }

  /** Drops entries whose time is at or before `cutoff`; past the cap, the oldest inserted go first. */
  private bounded(map: Map<string, number>, cutoff: number): void {
    if (map.size < MAX_ENTRIES) return;
    for (const [key, at] of map) if (at <= cutoff) map.delete(key);
    while (map.size >= MAX_ENTRIES) {
      const oldest = map.keys().next().value;
      if (oldest === undefined) break;
      map.delete(oldest);
    }
  }
}

export function getSessionRevocations(): SessionRevocations {
  return singleton("session-revocations", () => {
    const config = getConfig();
    return new SessionRevocations(getNodes, config.nodeTimeoutMs, path.resolve(config.dataDir, "revoked-sessions.jsonl"));
  });
}

/** Whether a session was signed out, here or on another console over the same nodes (see `isRevoked`). */
export function isSessionRevoked(id: string): Promise<boolean> {
  return getSessionRevocations().isRevoked(id);
}

/** Signs a session out everywhere; a shortfall on the nodes is logged (this console refuses it regardless). */
export async function revokeSession(id: string, expiresAtMs: number): Promise<void> {
  const { nodes, quorum } = await getSessionRevocations().revoke(id, expiresAtMs);
  if (nodes < quorum) {
    getLogger().warn({ action: "sign-out", nodes, quorum }, "sign-out recorded on too few lock nodes: other consoles may still accept the session");
  }
}
