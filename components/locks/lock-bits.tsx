"use client";

import { createContext, useContext } from "react";
import type { Lock } from "@/lib/locks/types";
import { nodesNow, type NodeCountingMap } from "./node-counting";
import { formatDuration, STATE_LABEL } from "./format";

/**
 * The TTL as a bar that shrinks to zero with the table's clock (`now`, a tick every 250 ms, counted on the
 * server's clock through `offsetMs`). It moves in those steps, not per frame: a table of 40 bars animated at
 * 60 frames a second kept a browser without a GPU composing frames all along (more than half a core).
 */
export function TtlBar({ lock, now, offsetMs }: { lock: Lock; now: number; offsetMs: number }) {
  const live = lock.state === "held" || lock.state === "partial" || lock.state === "elapsed";
  const total = lock.ttlMs ?? null;
  const expiresAt = lock.expiresAt;
  const remaining = expiresAt === null ? Infinity : expiresAt - (now + offsetMs);
  const text = !live ? "—" : expiresAt === null ? "never expires" : remaining <= 0 ? "elapsed" : formatDuration(remaining);
  const max = total ?? 0;
  // A lock without a TTL is not drawn as a healthy full bar: it is a hazard, shown as text instead (below).
  // The bar to a thousandth of its length, the value to the text's precision (0.1 s under 10 s, else 1 s): a
  // long lease's row then changes once a second, not on every tick of the clock.
  const fraction = live && expiresAt !== null && total ? Math.max(0, Math.min(1, remaining / total)) : 0;
  const valueStep = remaining < 10_000 ? 100 : 1_000;
  if (live && expiresAt === null) {
    // No bar at all: a full bar would read as a healthy lease, and this lock never frees itself.
    return (
      <span className="ttl">
        <span className="state-badge warn-badge warn-no-ttl" title={WARNING_TEXT["no-ttl"].why}>
          ⚠ no TTL<span className="sr-only">: never expires</span>
        </span>
      </span>
    );
  }
  return (
    <span className="ttl">
      <span
        className={`ttl-bar${(remaining < 1_000 || expiresAt === null) && live ? " low" : ""}`}
        role="progressbar"
        aria-label="TTL left"
        aria-valuemin={0}
        aria-valuemax={Math.round(max)}
        aria-valuenow={Number.isFinite(remaining) ? Math.max(0, Math.round(Math.min(remaining, max) / valueStep) * valueStep) : Math.round(max)}
        aria-valuetext={text}
      >
        <span className="ttl-fill" style={{ transform: `scaleX(${fraction.toFixed(3)})` }} />
      </span>
      <span className="ttl-text mono">{text}</span>
    </span>
  );
}

export function StateBadge({ state }: { state: Lock["state"] }) {
  return <span className={`state-badge state-${state}`}>{STATE_LABEL[state]}</span>;
}

/** `short`: the label in the table's narrow state column, where the full one would be cut (the cell's title says all). */
const WARNING_TEXT: Record<Lock["warnings"][number], { label: string; short?: string; why: string }> = {
  "no-ttl": { label: "no TTL", why: "This key never expires by itself: if its holder crashed, nobody frees it." },
  "stale-entries": { label: "stale permits", short: "stale", why: "The key still holds permits its library already counts as dead; the next acquirer prunes them." },
  truncated: { label: "partly read", why: "The key is larger than the console reads; only part of it is shown." },
};

/** What qualifies the state, in words, for a cell's title. */
export function badgesTitle(lock: Lock): string {
  return [STATE_LABEL[lock.state], lock.unreadable ? "not readable now: its last known state" : null, ...lock.warnings.map((w) => WARNING_TEXT[w].why)]
    .filter(Boolean)
    .join("\n");
}

/**
 * The state with what qualifies it: the lock cannot be read now, or a hazard (`compact`: the table's narrow
 * state column leaves no-TTL to the TTL column, which says it in place of the bar).
 */
export function LockBadges({ lock, compact = false }: { lock: Lock; compact?: boolean }) {
  return (
    <span className="lock-badges">
      <StateBadge state={lock.state} />
      {lock.unreadable && (
        <span className="state-badge warn-badge" title="Every node that holds it is down or not answering: this is its last known state.">
          not readable
        </span>
      )}
      {lock.warnings.filter((w) => !compact || w !== "no-ttl").map((w) => (
        <span key={w} className={`state-badge warn-badge warn-${w}`} title={WARNING_TEXT[w].why}>
          ⚠ {(compact && WARNING_TEXT[w].short) || WARNING_TEXT[w].label}
        </span>
      ))}
    </span>
  );
}

/** Each node's `counted` from its status (see `nodeCounting`): a lock's dots show the nodes as they stand now. */
export const NodeCounting = createContext<NodeCountingMap>(new Map());

type DotKind = "this" | "other" | "none" | "down";
const DOT_TEXT: Record<DotKind, string> = { this: "holds this value", other: "holds another value", none: "holds nothing", down: "down" };

/** One dot per node: holds the lock's value / another value / nothing / down (shape and label, not colour alone). */
export function NodeDots({ lock }: { lock: Lock }) {
  const nodes = nodesNow(lock, useContext(NodeCounting));
  // Without a quorum, the value the quorum text counts (`quorumHeld`): the one most nodes hold. A split vote with no
  // side ahead has none: every node holding a value holds another.
  const value = lock.token ?? lock.leading ?? null;
  return (
    <span className="node-dots">
      {nodes.map((node) => {
        const kind: DotKind = !node.up ? "down" : node.token === null ? "none" : node.token === value ? "this" : "other";
        return <span key={node.id} className={`node-dot ${kind}`} title={`${node.id}: ${DOT_TEXT[kind]}`} aria-label={`${node.id}: ${DOT_TEXT[kind]}`} role="img" />;
      })}
      {lock.scope === "single" ? (
        // A lock on one instance by design: one node is all it needs (the column is too narrow for words).
        <span className="quorum-text muted" title="single instance: held while its one node holds it">
          1<span className="sr-only"> node, single instance</span>
        </span>
      ) : (
        <span className="quorum-text muted">
          {lock.quorumHeld}/{lock.nodes.length}
        </span>
      )}
    </span>
  );
}

/** Attempts per 5 s over the last minute. */
export function Sparkline({ values, label }: { values: number[]; label: string }) {
  const max = Math.max(1, ...values);
  const w = 60;
  const h = 16;
  const step = values.length > 1 ? w / (values.length - 1) : w;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(h - (v / max) * (h - 2) - 1).toFixed(1)}`).join(" ");
  return (
    <svg className="sparkline" width={w} height={h} viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
      <polyline points={points} fill="none" stroke="currentColor" strokeWidth="1.5" />
    </svg>
  );
}
