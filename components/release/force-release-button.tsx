"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useId, useRef, useState, type FormEvent } from "react";
import type { Lock } from "@/lib/locks/types";
import { apiFetch, ApiRequestError } from "../api-client";
import { useIsOperator } from "../session";
import styles from "./force-release.module.css";

interface ReleaseResponse {
  released: true;
  nodes: Array<{ id: string; result: "deleted" | "absent" | "mismatch" | "error" }>;
  auditId: string;
}

interface CurrentHolder {
  token: string | null;
  holder: { label: string | null; host: string | null; pid: number | null; fence: string | null } | null;
  nodes: Array<{ id: string; token: string | null }>;
}

type Outcome =
  | { kind: "idle" }
  | { kind: "sending" }
  | { kind: "released"; response: ReleaseResponse }
  | { kind: "changed-hands"; current: CurrentHolder | null; message: string }
  | { kind: "error"; message: string };

export interface ForceReleaseButtonProps {
  resource: string;
  /** The lock as the operator sees it: its token is what the release compares against. */
  lock: Lock;
  /** Server clock minus browser clock, for the TTL countdown (the live view knows it). @default 0 */
  serverOffsetMs?: number;
  /** Called once the release succeeded. */
  onReleased?: (response: ReleaseResponse) => void;
  className?: string;
}

/**
 * The token to compare-and-delete with: the quorum's value, else the one value every holding node
 * agrees on. Null when the nodes disagree (a partial lock): then the release takes whatever is held.
 */
export function targetToken(lock: Lock): string | null {
  if (lock.token) return lock.token;
  const held = new Set(lock.nodes.map((n) => n.token).filter((t): t is string => t !== null));
  return held.size === 1 ? [...held][0]! : null;
}

function holderLine(holder: { label?: string | null; host?: string | null; pid?: number | null } | null): string {
  if (!holder) return "a foreign value (not written by the Lockscope engine)";
  const where = [holder.host, holder.pid !== undefined && holder.pid !== null ? `pid ${holder.pid}` : null].filter(Boolean).join(", ");
  return [holder.label ?? "unlabelled holder", where ? `(${where})` : null].filter(Boolean).join(" ");
}

function shortToken(token: string): string {
  return token.length > 48 ? `${token.slice(0, 47)}…` : token;
}

function ttlText(lock: Lock, now: number, offsetMs: number): string {
  if (lock.expiresAt === null) return "no TTL (never expires on its own)";
  const left = lock.expiresAt - (now + offsetMs);
  if (left <= 0) return "elapsed (Redis has not reclaimed it yet)";
  return left < 10_000 ? `${(left / 1000).toFixed(1)} s` : `${Math.round(left / 1000)} s`;
}

/** "Force release" for operators: a dialog with the lock's facts and a required reason. Renders nothing for viewers. */
export function ForceReleaseButton({ resource, lock, serverOffsetMs = 0, onReleased, className }: ForceReleaseButtonProps) {
  const isOperator = useIsOperator();
  const dialogRef = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const [outcome, setOutcome] = useState<Outcome>({ kind: "idle" });
  const [now, setNow] = useState(() => Date.now());
  // What the operator looked at when opening: the release compares against this, not a later update.
  const [seen, setSeen] = useState<Lock>(lock);
  const queryClient = useQueryClient();
  const titleId = useId();
  const reasonId = useId();

  useEffect(() => {
    if (!open) return;
    const timer = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(timer);
  }, [open]);

  if (!isOperator) return null;

  const token = targetToken(seen);
  const close = () => {
    dialogRef.current?.close();
  };
  const openDialog = () => {
    setSeen(lock);
    setReason("");
    setOutcome({ kind: "idle" });
    setNow(Date.now());
    setOpen(true);
    dialogRef.current?.showModal();
  };

  async function submit(event: FormEvent) {
    event.preventDefault();
    setOutcome({ kind: "sending" });
    try {
      const response = await apiFetch<ReleaseResponse>(`/api/locks/${encodeURIComponent(resource)}/release`, {
        method: "POST",
        body: JSON.stringify({ reason: reason.trim(), ...(token ? { token } : {}) }),
      });
      setOutcome({ kind: "released", response });
      onReleased?.(response);
      void queryClient.invalidateQueries({ predicate: (q) => ["locks", "lock", "audit"].includes(String(q.queryKey[0])) });
    } catch (error) {
      if (error instanceof ApiRequestError && error.status === 409) {
        const details = error.details as { current?: CurrentHolder } | undefined;
        setOutcome({ kind: "changed-hands", current: details?.current ?? null, message: error.message });
      } else if (error instanceof ApiRequestError) {
        setOutcome({ kind: "error", message: error.message });
      } else {
        setOutcome({ kind: "error", message: "Could not reach the console; nothing was released." });
      }
    }
  }

  const sending = outcome.kind === "sending";
  const done = outcome.kind === "released";
  const reasonOk = reason.trim().length >= 3;

  return (
    <>
      <button type="button" className={`button danger ${className ?? ""}`} onClick={openDialog} aria-haspopup="dialog">
        Force release
      </button>
      <dialog ref={dialogRef} aria-labelledby={titleId} className={styles.dialog} onClose={() => setOpen(false)}>
        <form onSubmit={submit} className={styles.form}>
          <h2 id={titleId} className={styles.title}>
            Force release <code>{resource}</code>
          </h2>
          <dl className={styles.facts}>
            <dt>Holder</dt>
            <dd>{holderLine(seen.holder)}</dd>
            <dt>Fence</dt>
            <dd>{seen.fence ?? "none (not taken fenced)"}</dd>
            <dt>TTL left</dt>
            <dd>{ttlText(seen, now, serverOffsetMs)}</dd>
            <dt>Token</dt>
            <dd className="mono">{token ? shortToken(token) : "no single value: every value held will be deleted"}</dd>
            <dt>Nodes</dt>
            <dd>
              <ul className={styles.nodes} aria-label="Nodes">
                {seen.nodes.map((n) => (
                  <li key={n.id}>
                    <span className={`dot ${n.token === null ? "down" : n.token === token ? "up" : "degraded"}`} aria-hidden />
                    {n.id}: {n.token === null ? "holds nothing" : n.token === token ? "holds it" : `holds another value (${shortToken(n.token)})`}
                    {n.pttlMs !== null ? `, ${Math.round(n.pttlMs / 1000)} s TTL when seen` : ""}
                  </li>
                ))}
              </ul>
            </dd>
          </dl>
          <p className="muted">
            The holder&apos;s <code>using()</code> signal aborts at once and the fence moves on, so its late writes are refused. This is recorded in the
            audit log with your name and reason.
          </p>
          <label htmlFor={reasonId}>
            Reason
            <textarea
              id={reasonId}
              name="reason"
              required
              minLength={3}
              maxLength={500}
              rows={3}
              value={reason}
              onChange={(e) => setReason(e.target.value)}
              disabled={sending || done}
              placeholder="Why, for the audit log (at least 3 characters)"
            />
          </label>
          {outcome.kind === "released" && (
            <p role="status" className={styles.ok}>
              Released on {outcome.response.nodes.filter((n) => n.result === "deleted").length} of {outcome.response.nodes.length} nodes
              {outcome.response.nodes.some((n) => n.result === "error") ? " (some nodes did not answer)" : ""}. Audit entry{" "}
              <a href={`/audit?resource=${encodeURIComponent(resource)}`}>{outcome.response.auditId}</a>.
            </p>
          )}
          {outcome.kind === "changed-hands" && (
            <div role="alert" className={styles.alert}>
              <p>
                <strong>The lock changed hands</strong> since you opened this dialog; nothing was released.
              </p>
              {outcome.current?.token ? (
                <p>
                  It is now held by {holderLine(outcome.current.holder)}
                  {outcome.current.holder?.fence ? `, fence ${outcome.current.holder.fence}` : ""} (token{" "}
                  <span className="mono">{shortToken(outcome.current.token)}</span>).
                </p>
              ) : (
                <p>{outcome.message}</p>
              )}
              <p className="muted">Close this dialog and look at the lock again before releasing the new holder.</p>
            </div>
          )}
          {outcome.kind === "error" && (
            <p role="alert" className="error-text">
              {outcome.message}
            </p>
          )}
          <div className={styles.actions}>
            <button type="button" className="button" onClick={close}>
              {done || outcome.kind === "changed-hands" ? "Close" : "Cancel"}
            </button>
            {!done && outcome.kind !== "changed-hands" && (
              <button type="submit" className="button danger" disabled={sending || !reasonOk}>
                {sending ? "Releasing…" : "Release"}
              </button>
            )}
          </div>
        </form>
      </dialog>
    </>
  );
}
