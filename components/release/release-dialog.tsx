"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useId, useRef, useState, useSyncExternalStore, type FormEvent } from "react";
import { isSplitVote, SPLIT_VOTE_HOLDER } from "@/lib/locks/holder-text";
import { leadingValue } from "@/lib/locks/leading-value";
import { replicationWarning, whoIsTold, type ReleaseCopies } from "@/lib/locks/release-text";
import { isLive, type EndedState, type Lock } from "@/lib/locks/types";
import { apiFetch, ApiRequestError } from "../api-client";
import { FORMAT_LABEL, holderLine as formatHolderLine } from "../locks/format";
import { lockDetailKey, type FeedScope } from "../locks/live-feed";
import { useLiveLocks } from "../locks/use-live-locks";
import styles from "./force-release.module.css";
import { MessageText } from "../message-text";

export interface ReleaseResponse {
  released: true;
  /** `partial`: nodes that held it did not confirm the delete, too many for the lock to be over. */
  outcome: "released" | "partial";
  format: Lock["format"];
  /** `error`: on that node, what happened in a sentence (no answer, refused, a key of another type left untouched). */
  nodes: Array<{ id: string; result: "deleted" | "absent" | "mismatch" | "error"; error?: string }>;
  /** `holder`: the holder's process heard the revocation (only this engine's can); `waiters`: a wake message went to the library's waiters. */
  notified: { holder: boolean; waiters: boolean };
  auditId: string;
  /** False: the audit log did not take the outcome yet (the entry reads pending while the console retries). */
  outcomeRecorded: boolean;
  /** On a primary with replicas: which replicas copied the delete (a failover to one that did not brings the lock back). */
  replication?: ReleaseCopies;
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

const EVERY_LOCK: FeedScope = { locks: "all" };

export interface ReleaseDialogProps {
  resource: string;
  /** The lock as it was when the operator opened the dialog: its token is what the release compares against. */
  lock: Lock;
  /** Server clock minus browser clock, for the TTL countdown. */
  serverOffsetMs: number;
  /** The lock's group: the dialog follows the lock on that group's stream (else on every lock's). */
  group?: string;
  onReleased?: (response: ReleaseResponse) => void;
  /** The dialog closed (Cancel, Close, Escape). */
  onClosed: () => void;
}

/**
 * The token to compare-and-delete with: the quorum's value, else the value the page shows as leading, else (a split
 * vote with no side ahead) the one most nodes hold, the first node's on a tie (across every node where none that
 * answers holds one). Always a value the operator saw: a release without one would take whatever is held when it runs,
 * a holder that may have taken the lock since. Null only when no node holds a value.
 */
export function targetToken(lock: Lock): string | null {
  // Other formats compare by holder id (a Redisson holder field, a semaphore member): the single holder's.
  if (lock.format !== "lockscope" && lock.format !== "token") return lock.holders.length === 1 ? (lock.holders[0]?.id ?? null) : null;
  if (lock.token) return lock.token;
  return lock.leading ?? leadingValue(lock.nodes);
}

function holderLine(holder: { label?: string | null; host?: string | null; pid?: number | null } | null): string {
  if (!holder) return "a foreign value (not written by the Lockscope engine)";
  const where = [holder.host, holder.pid !== undefined && holder.pid !== null ? `pid ${holder.pid}` : null].filter(Boolean).join(", ");
  return [holder.label ?? "unlabelled holder", where ? `(${where})` : null].filter(Boolean).join(" ");
}

/**
 * The holder of a split vote with no side ahead, as the dialog says it: no value leads (the lock names no holder),
 * every side's holder with the nodes holding it, and the value released: the one proposed, on the nodes listed. (Not
 * "a foreign value": the values may be this engine's, each with its fence.)
 */
function splitVoteHolder(lock: Lock, token: string | null): string {
  const sides = lock.holders.length > 0 ? `: ${lock.holders.map(formatHolderLine).join("; ")}` : "";
  if (token === null) return `${SPLIT_VOTE_HOLDER}${sides}`;
  const on = lock.nodes.filter((n) => nodeHolds(n.token, token)).map((n) => n.id);
  return `${SPLIT_VOTE_HOLDER}${sides}; released here: the value on ${on.join(", ") || "no node now"}`;
}

/**
 * Whether a node's value holds the holder chosen: the value itself, or one line of a set of holders (a
 * semaphore's permits, a read-write lock's readers: one holder per line).
 */
function nodeHolds(value: string | null, chosen: string | null): boolean {
  if (value === null || chosen === null) return false;
  return value === chosen || value.split("\n").includes(chosen);
}

function shortToken(token: string): string {
  return token.length > 48 ? `${token.slice(0, 47)}…` : token;
}

function ttlText(lock: Lock, now: number, offsetMs: number): string {
  if (!isLive(lock.state)) return `none: ${lock.state}`;
  if (lock.expiresAt === null) return "no TTL (never expires on its own)";
  const left = lock.expiresAt - (now + offsetMs);
  if (left <= 0) return "elapsed (Redis has not reclaimed it yet)";
  return left < 10_000 ? `${(left / 1000).toFixed(1)} s` : `${Math.round(left / 1000)} s`;
}

/** How an ended lock ended, as the dialog says it (the state the live view last gave it). */
const ENDED_TEXT: Record<EndedState, string> = {
  released: "it was released (its key was deleted)",
  expired: "it expired (its TTL ran out)",
  "force-released": "it was force-released (see the audit log)",
  lost: "it was lost: a node restarted without it, or a failover promoted a replica that never had it (see its timeline)",
};

/**
 * Who holds the live lock now, as a release's 409 says it (`current`): a value (this engine's or a plain token), or
 * the one holder of another format; no token where several hold it (a semaphore's other permits are no one value).
 */
function nowHeldBy(lock: Lock): CurrentHolder {
  const token = targetToken(lock);
  const holder = lock.holder ? { label: lock.holder.label ?? null, host: lock.holder.host ?? null, pid: lock.holder.pid ?? null, fence: lock.fence } : null;
  return { token, holder, nodes: lock.nodes.map((n) => ({ id: n.id, token: n.token })) };
}

/** Nodes that still hold another value after the release (one side of a split vote, another holder): the lock goes on there. */
function goesOn(response: ReleaseResponse): string[] {
  return response.nodes.filter((n) => n.result === "mismatch").map((n) => n.id);
}

/** Each node where the release failed or left a key untouched, with what happened there, as the audit entry says it. */
function failedNodes(response: ReleaseResponse): string {
  return response.nodes
    .filter((n) => n.result === "error")
    .map((n) => `${n.id}: ${n.error ?? "no result"}`)
    .join("; ");
}

/** What the release did, in one sentence without its final stop. */
function ReleasedText({ response }: { response: ReleaseResponse }) {
  const deleted = response.nodes.filter((n) => n.result === "deleted").length;
  const total = response.nodes.length;
  if (response.outcome === "partial") {
    const silent = response.nodes.filter((n) => n.result === "error").map((n) => n.id);
    return (
      <>
        Only partly released: deleted on {deleted} of {total} nodes; {silent.join(", ")} did not confirm ({failedNodes(response)}), so the lock may still be held. Read it
        again before retrying
      </>
    );
  }
  const others = goesOn(response);
  if (others.length > 0) {
    return (
      <>
        Released on {deleted} of {total} nodes, but the lock goes on with another value on {others.length} of {total} nodes ({others.join(", ")}). Look at the lock
        again before releasing that value
      </>
    );
  }
  return (
    <>
      Released on {deleted} of {total} nodes{response.nodes.some((n) => n.result === "error") ? ` (not on ${failedNodes(response)})` : ""}
    </>
  );
}

/**
 * The lock as the page that opened the dialog has it (its query, whose key names the deployment or not): the live
 * feed patches it with the lock's changes, also where the tab follows the lock's group rather than every lock,
 * and reads it again after the stream started anew.
 */
function usePageLock(resource: string, deployment: string): Lock | undefined {
  const client = useQueryClient();
  const subscribe = useCallback((changed: () => void) => client.getQueryCache().subscribe(changed), [client]);
  const read = () =>
    [lockDetailKey(resource, deployment), lockDetailKey(resource)].map((key) => client.getQueryData<Lock>(key)).find((lock) => lock?.deployment === deployment);
  return useSyncExternalStore(subscribe, read, () => undefined);
}

/** A modal `<dialog>` with the lock's facts, a required reason and "Release". Opens as soon as it mounts. */
export function ReleaseDialog({ resource, lock: opened, serverOffsetMs, group, onReleased, onClosed }: ReleaseDialogProps) {
  // The TTL and nodes keep following the live view while the dialog is open (an extension, an expiry); the
  // holder it releases stays the one the operator opened it for. With the lock's group, the tab's stream carries
  // that group's changes (as for the lock's page), which the live feed patches into the page's lock.
  const live = useLiveLocks(group === undefined ? EVERY_LOCK : { locks: "group", group });
  const queryClient = useQueryClient();
  const onPage = usePageLock(resource, opened.deployment);
  const listed = live.data?.locks.find((l) => l.resource === resource && l.deployment === opened.deployment) ?? onPage;
  // An ended lock leaves the live list a few seconds after it ends: keep showing it as last listed (ended),
  // never again as the held lock the dialog was opened on.
  const [lastListed, setLastListed] = useState<Lock | null>(null);
  if (listed && listed !== lastListed) setLastListed(listed);
  const lock = listed ?? lastListed ?? opened;
  const offsetMs = live.data?.offsetMs ?? serverOffsetMs;
  const dialogRef = useRef<HTMLDialogElement>(null);
  const closeRef = useRef<HTMLButtonElement>(null);
  const [reason, setReason] = useState("");
  const [outcome, setOutcome] = useState<Outcome>({ kind: "idle" });
  const [now, setNow] = useState(() => Date.now());
  const titleId = useId();
  const reasonId = useId();
  const [chosen, setChosen] = useState<string | null>(() => targetToken(opened));
  const token = chosen;
  const holderId = useId();
  const outcomeId = useId();
  const manyHolders = opened.format !== "lockscope" && opened.format !== "token" && opened.holders.length > 1;

  useEffect(() => {
    const dialog = dialogRef.current;
    if (dialog && !dialog.open) dialog.showModal();
    const timer = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(timer);
  }, []);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setOutcome({ kind: "sending" });
    try {
      // The deployment the operator is looking at, always: a release never lands on another deployment's key of the same name.
      const response = await apiFetch<ReleaseResponse>(`/api/locks/${encodeURIComponent(resource)}/release?deployment=${encodeURIComponent(opened.deployment)}`, {
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
      } else if (error instanceof ApiRequestError && error.status === 401) {
        // Signed out meanwhile (expired, or in another tab): said in the page's words, not the API's, and the header
        // asks who is signed in again.
        setOutcome({ kind: "error", message: "Your session has ended, so nothing was released. Sign in again, then release the lock." });
        void queryClient.invalidateQueries({ queryKey: ["session"] });
      } else if (error instanceof ApiRequestError) {
        setOutcome({ kind: "error", message: error.message });
      } else {
        setOutcome({ kind: "error", message: "Could not reach the console; nothing was released." });
      }
    }
  }

  const sending = outcome.kind === "sending";
  // The lock ended while the dialog was open (by its holder, its TTL, another operator): nothing left to release.
  const ended = !isLive(lock.state) && outcome.kind !== "released" && outcome.kind !== "sending" ? lock.state : null;
  // The lock changed hands while the dialog was open: it is live, yet no node holds the holder the dialog was opened
  // for (a node that cannot be read counts with its last value). Said at once, with the new holder, as a release would
  // answer it; the fence and TTL shown are the new holder's, so no release of the old one is offered beside them.
  // (A key read only in part may hold that holder past what was read: the release asks the nodes by name.)
  const handedOver =
    ended === null &&
    (outcome.kind === "idle" || outcome.kind === "error") &&
    token !== null &&
    !lock.unreadable &&
    !lock.warnings.includes("truncated") &&
    !lock.nodes.some((n) => nodeHolds(n.token, token))
      ? nowHeldBy(lock)
      : null;
  const shown: Outcome = handedOver ? { kind: "changed-hands", current: handedOver, message: "" } : outcome;
  const finished = shown.kind === "released" || shown.kind === "changed-hands" || ended !== null;
  // The Release button goes once there is an outcome: hand the focus to Close rather than lose it to the page.
  useEffect(() => {
    if (finished) closeRef.current?.focus();
  }, [finished]);

  return (
    <dialog
      ref={dialogRef}
      aria-labelledby={titleId}
      className={styles.dialog}
      onClose={onClosed}
      // A release under way cannot be taken back: Escape then would only hide its outcome.
      onCancel={(event) => {
        if (sending) event.preventDefault();
      }}
    >
      <form onSubmit={submit} className={styles.form}>
        <h2 id={titleId} className={styles.title}>
          Force release <code>{resource}</code>
        </h2>
        <dl className={styles.facts}>
          <dt>Format</dt>
          <dd>{FORMAT_LABEL[opened.format]}</dd>
          <dt>Holder</dt>
          <dd>
            {manyHolders ? (
              <select id={holderId} aria-label="Holder to release" value={chosen ?? ""} onChange={(e) => setChosen(e.target.value || null)} disabled={sending || finished}>
                <option value="">Choose the holder to release…</option>
                {opened.holders.map((h) => (
                  <option key={h.id} value={h.id}>
                    {formatHolderLine(h)}
                  </option>
                ))}
              </select>
            ) : (opened.format === "lockscope" || opened.format === "token") && isSplitVote(opened) ? (
              splitVoteHolder(opened, token)
            ) : opened.format === "lockscope" || opened.format === "token" ? (
              holderLine(opened.holder)
            ) : (
              (opened.holders[0] && formatHolderLine(opened.holders[0])) ?? "—"
            )}
          </dd>
          <dt>Fence</dt>
          {/* A split vote names no value, so no fence either: its values may each carry one. */}
          <dd>{lock.fence ?? (isSplitVote(lock) ? "unknown: no value leads" : "none (not taken fenced)")}</dd>
          <dt>TTL left</dt>
          <dd>{ttlText(lock, now, offsetMs)}</dd>
          <dt>Token</dt>
          <dd className="mono">{token ? shortToken(token) : manyHolders ? "choose a holder above" : "none: no node holds a value"}</dd>
          <dt>Nodes</dt>
          <dd>
            <ul className={styles.nodes} aria-label="Nodes">
              {lock.nodes.map((n) => {
                const holds = nodeHolds(n.token, token);
                // A node the console cannot read is not empty: what it holds is unknown, as the lock page says.
                if (!n.up) {
                  return (
                    <li key={n.id}>
                      <span className="dot down" aria-hidden />
                      {n.id}: down or not answering: unknown
                    </li>
                  );
                }
                return (
                  <li key={n.id}>
                    {/* An empty ring for a node holding nothing, as the page's node dots draw it: the cross is for a node down. */}
                    <span className={`dot ${n.token === null ? "none" : holds ? "up" : "degraded"}`} aria-hidden />
                    {n.id}: {n.token === null ? "holds nothing" : holds ? (n.token === token ? "holds it" : "holds it, among other holders") : `holds another value (${shortToken(n.token)})`}
                    {n.pttlMs !== null ? `, ${Math.round(n.pttlMs / 1000)} s TTL when seen` : ""}
                  </li>
                );
              })}
            </ul>
          </dd>
        </dl>
        {ended === null && shown.kind !== "changed-hands" && (
          <p className={opened.format === "lockscope" ? "muted" : styles.alert} role="note" aria-label="Who will be told">
            {whoIsTold(opened)} This is recorded in the audit log with your name and reason.
          </p>
        )}
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
            disabled={sending || finished}
            placeholder="Why, for the audit log (at least 3 characters)"
          />
        </label>
        {ended !== null && shown.kind !== "changed-hands" && (
          <p id={outcomeId} role="status" className={styles.warn}>
            This lock has ended: {ENDED_TEXT[ended]}
            {lock.endedAt ? ` at ${new Date(lock.endedAt).toLocaleTimeString()}` : ""}; there is nothing to release.
          </p>
        )}
        {outcome.kind === "released" && (
          <p
            id={outcomeId}
            role="status"
            className={
              outcome.response.outcome === "partial" ||
              goesOn(outcome.response).length > 0 ||
              outcome.response.outcomeRecorded === false ||
              replicationWarning(outcome.response.replication) !== null
                ? styles.warn
                : styles.ok
            }
          >
            <ReleasedText response={outcome.response} />. Audit entry{" "}
            <a href={`/audit?resource=${encodeURIComponent(resource)}`}>{outcome.response.auditId}</a>.{" "}
            {outcome.response.notified.holder
              ? "The holder's process heard it: a using() routine holding the lock stops at once."
              : "The holder was not told: if it still runs, it finds out at its next extend or release."}{" "}
            {outcome.response.notified.waiters ? "Its waiters were woken." : "No waiter was woken."}
            {outcome.response.outcomeRecorded === false &&
              " The audit log did not take this outcome: the entry reads pending until the console, which keeps trying, records it."}
            {replicationWarning(outcome.response.replication) !== null && ` ${replicationWarning(outcome.response.replication)}`}
          </p>
        )}
        {shown.kind === "changed-hands" && (
          <div id={outcomeId} role="alert" className={styles.alert}>
            <p>
              <strong>The lock changed hands</strong> since you opened this dialog; nothing was released.
            </p>
            {shown.current?.token ? (
              <p>
                It is now held by {holderLine(shown.current.holder)}
                {shown.current.holder?.fence ? `, fence ${shown.current.holder.fence}` : ""} (token{" "}
                <span className="mono">{shortToken(shown.current.token)}</span>).
              </p>
            ) : shown.message ? (
              <p>
                <MessageText text={shown.message} />
              </p>
            ) : (
              <p>No node has the holder you chose any more; what each node holds now is listed above.</p>
            )}
            <p className="muted">Close this dialog and look at the lock again before releasing the new holder.</p>
          </div>
        )}
        {shown.kind === "error" && (
          <p role="alert" className="error-text">
            <MessageText text={shown.message} />
          </p>
        )}
        <div className={styles.actions}>
          {/* The focus comes here with the outcome: a screen reader reads the outcome with the button, which a status
              announced as the focus moves would be cut short by. */}
          <button ref={closeRef} type="button" className="button" onClick={() => dialogRef.current?.close()} disabled={sending} aria-describedby={finished ? outcomeId : undefined}>
            {finished ? "Close" : "Cancel"}
          </button>
          {!finished && (
            <button type="submit" className="button danger" disabled={sending || reason.trim().length < 3 || (manyHolders && !chosen)}>
              {sending ? "Releasing…" : "Release"}
            </button>
          )}
        </div>
      </form>
    </dialog>
  );
}
