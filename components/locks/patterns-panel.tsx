"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { PATTERN_ACCESS_CHECK_MS } from "@/lib/locks/glob";
import type { Lock } from "@/lib/locks/types";
import { apiFetch, ApiRequestError, errorText } from "../api-client";
import { MessageText } from "../message-text";
import { useIsOperator } from "../session";
import { TableHead, TableScroll } from "../table-scroll";
import { FORMAT_LABEL } from "./format";
import { useNow } from "./use-live-locks";

interface PatternEntry {
  glob: string;
  scope?: "quorum" | "single";
}

interface PatternsResponse {
  patterns: PatternEntry[];
  source: "config" | "console";
  updatedAt: number | null;
  updatedBy: string | null;
  revision: string;
  /** In a change's answer: lock nodes that did not answer its ACL check in time (their watchers tell later). */
  notChecked?: string[];
}

interface DiscoveryResponse {
  scannedKeys: number;
  complete: boolean;
  /** When the oldest of the nodes' last full scans ended (server clock); null until every node was scanned to its end. */
  scannedAt: number | null;
  serverTime: number;
  candidates: Array<{ pattern: string; format: Lock["format"]; keys: number; examples: string[] }>;
  /**
   * Each node's scan: `error` says why its last pass stopped (down, scripts refused), null once one ends;
   * `refusedKeys`, the keys outside the patterns its ACL does not let the console's Redis user read (passed over).
   */
  nodes: Array<{ id: string; error: string | null; refusedKeys: number }>;
}

/** "3 min ago", "1 h 20 min ago": how long ago discovery's last full scan ended. */
function agoText(ms: number): string {
  const minutes = Math.floor(Math.max(0, ms) / 60_000);
  if (minutes < 1) return "less than a minute ago";
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h ago` : `${hours} h ${minutes % 60} min ago`;
}

const SCOPE_TEXT = { quorum: "Redlock (quorum)", single: "single instance" } as const;

/**
 * The lock patterns in force and what discovery found outside them. Everyone sees both; an operator adds or
 * removes a pattern at once (PUT /api/patterns, with a reason for the audit log). The list is read again every
 * 5 s (another operator may change it, on any console), and a change is made on the list as shown: when the list
 * changed meanwhile, the console refuses it (409) and the panel shows the list as it is now.
 */
export function PatternsPanel() {
  const isOperator = useIsOperator();
  const queryClient = useQueryClient();
  const patterns = useQuery({ queryKey: ["patterns"], queryFn: () => apiFetch<PatternsResponse>("/api/patterns"), refetchInterval: 5_000, retry: false });
  const discovery = useQuery({ queryKey: ["discovery"], queryFn: () => apiFetch<DiscoveryResponse>("/api/discovery"), refetchInterval: 15_000, retry: false });
  const now = useNow(10_000);
  const [glob, setGlob] = useState("");
  const [scope, setScope] = useState<"" | "quorum" | "single">("");
  const [reason, setReason] = useState("");
  const globId = useId();
  const reasonId = useId();
  const scopeId = useId();
  const save = useMutation({
    mutationFn: (next: PatternEntry[]) =>
      apiFetch<PatternsResponse>("/api/patterns", { method: "PUT", body: JSON.stringify({ patterns: next, reason: reason.trim(), revision: patterns.data?.revision }) }),
    onError: (error) => {
      if (error instanceof ApiRequestError && error.status === 409) void queryClient.invalidateQueries({ queryKey: ["patterns"] });
    },
    onSuccess: (state) => {
      queryClient.setQueryData(["patterns"], state);
      setGlob("");
      setScope("");
      void queryClient.invalidateQueries({ queryKey: ["discovery"] });
    },
  });

  if (patterns.error instanceof ApiRequestError && patterns.error.status === 401) return null;
  const current = patterns.data?.patterns ?? [];
  // A change is the whole new list: made before the list in force was read, it would be made on an empty one and
  // replace every pattern (and without a revision, nothing would refuse it).
  const loaded = patterns.data !== undefined;
  const canSave = loaded && reason.trim().length >= 3 && !save.isPending;
  const cannotSave = loaded ? "Give a reason first (it goes to the audit log)" : "The lock patterns in force have not been read yet";

  const typed = glob.trim();
  const listed = current.find((p) => p.glob === typed);
  // The form changes a listed pattern's scope: the glob is listed and the scope chosen differs from its own.
  const rescoping = listed !== undefined && (listed.scope ?? "") !== scope;

  // The scan's age on the console's clock (the browser's may be off), as of the later of the last tick and the last answer.
  const scanned = discovery.data
    ? discovery.data.scannedAt === null
      ? "Not scanned yet: the first scan of every node has not ended."
      : `Scanned ${agoText(Math.max(now, discovery.dataUpdatedAt) - discovery.dataUpdatedAt + discovery.data.serverTime - discovery.data.scannedAt)} (a new scan starts 10 minutes after one ends).`
    : null;
  // A node whose scan keeps failing is scanned again every 5 s from its start: say so, rather than let "none yet"
  // read as a scan still on its way.
  const failing = discovery.data?.nodes.filter((n) => n.error !== null) ?? [];
  // Keys a node's ACL does not let the console read are passed over: "every lock-shaped key is under a pattern"
  // would not be true of them.
  const refused = discovery.data?.nodes.filter((n) => n.refusedKeys > 0) ?? [];

  const scopeText = (s: "" | "quorum" | "single" | undefined) => (s ? SCOPE_TEXT[s] : "inferred scope");
  // What the form does with a pattern already listed, said before the operator sends anything.
  const note =
    !typed || !listed
      ? null
      : rescoping
        ? `\`${typed}\` is listed (${scopeText(listed.scope)}): this changes it to ${scopeText(scope)}.`
        : `\`${typed}\` is already listed (${scopeText(listed.scope)}). Choose another scope to change it.`;

  /** Any edit of the pending change: a refusal of the previous one no longer applies. */
  function edited() {
    if (save.isError) save.reset();
  }

  function add(event: FormEvent) {
    event.preventDefault();
    if (!typed || !canSave) return;
    const entry: PatternEntry = { glob: typed, ...(scope ? { scope } : {}) };
    if (!listed) {
      save.mutate([...current, entry]);
    } else if (rescoping) {
      save.mutate(current.map((p) => (p.glob === typed ? entry : p)));
    }
  }

  return (
    <section className="panel patterns-panel" aria-labelledby="patterns-heading">
      <h2 id="patterns-heading">Lock patterns and discovery</h2>
      <p className="muted">
        Only keys that match one of these Redis globs are shown and can be released. A pattern may declare its locks single-instance (held while one node
        holds them) or Redlocks (held only with a quorum); otherwise the console infers it.
        {patterns.data?.source === "console" && patterns.data.updatedBy ? ` Last changed by ${patterns.data.updatedBy}.` : ""}
      </p>
      {patterns.error && (
        <p role="alert" className="error-text">
          <MessageText text={patterns.error.message} />
        </p>
      )}
      <ul className="pattern-list" aria-label="Lock patterns">
        {current.map((p) => (
          <li key={p.glob}>
            <code>{p.glob}</code>
            {p.scope && <span className="muted"> · {SCOPE_TEXT[p.scope]}</span>}
            {isOperator && (
              <button
                type="button"
                className="button small"
                aria-label={`Remove pattern ${p.glob}`}
                disabled={!canSave || current.length <= 1}
                title={canSave ? undefined : cannotSave}
                onClick={() => save.mutate(current.filter((x) => x.glob !== p.glob))}
              >
                Remove
              </button>
            )}
          </li>
        ))}
      </ul>
      {isOperator && (
        <form className="pattern-form" onSubmit={add} aria-label="Change lock patterns">
          <label htmlFor={reasonId}>
            Reason (for the audit log)
            <input id={reasonId} type="text" value={reason} minLength={3} maxLength={500} onChange={(e) => {
                setReason(e.target.value);
                edited();
              }} placeholder="Why you change the patterns" />
          </label>
          <label htmlFor={globId}>
            Pattern
            <input id={globId} type="text" className="mono" value={glob} maxLength={200} onChange={(e) => {
                setGlob(e.target.value);
                edited();
              }} placeholder="e.g. orders:lock:*" />
          </label>
          <label htmlFor={scopeId}>
            Scope
            <select id={scopeId} value={scope} onChange={(e) => {
                setScope(e.target.value as "" | "quorum" | "single");
                edited();
              }}>
              <option value="">inferred</option>
              <option value="single">single instance</option>
              <option value="quorum">Redlock (quorum)</option>
            </select>
          </label>
          <button type="submit" className="button primary" disabled={!canSave || glob.trim() === ""} title={canSave ? undefined : cannotSave}>
            {rescoping ? "Change scope" : "Add pattern"}
          </button>
        </form>
      )}
      {save.error && (
        <p role="alert" className="error-text">
          <MessageText text={errorText(save.error)} />
        </p>
      )}
      {save.data?.notChecked && !save.isPending && (
        <p role="status" className="muted">
          <MessageText text={`Applied. Not checked against the ACL of ${save.data.notChecked.join(", ")} (no answer within ${PATTERN_ACCESS_CHECK_MS / 1000} s): if that node refuses a new pattern, its status on the nodes panel says so.`} />
        </p>
      )}
      {note && (
        <p role="status" className="muted">
          <MessageText text={note} />
        </p>
      )}

      <h3>Lock-shaped keys outside the patterns</h3>
      {scanned && <p className="muted">{scanned}</p>}
      {failing.length > 0 && (
        <p role="status" className="error-text">
          <MessageText
            text={`${failing.map((n) => `${n.id}: its scan failed (${n.error})`).join("; ")}. ${failing.length === 1 ? "It is" : "They are"} scanned again from the start every 5 s; what is suggested from ${failing.length === 1 ? "it" : "them"} is what the last full scan found, if one ended.`}
          />
        </p>
      )}
      {refused.length > 0 && (
        <p role="status" className="muted">
          <MessageText
            text={`Not looked at: ${refused.map((n) => `${n.refusedKeys} ${n.refusedKeys === 1 ? "key" : "keys"} on ${n.id}`).join(", ")}, which the ${refused.length === 1 ? "node's" : "nodes'"} ACL does not let the console's Redis user read. To let discovery look at such keys, give the user \`~<glob>\` for them.`}
          />
        </p>
      )}
      {discovery.error ? (
        <p className="muted">Discovery is not available: {discovery.error.message}</p>
      ) : !discovery.data ? (
        <p className="muted">Scanning the nodes…</p>
      ) : discovery.data.candidates.length === 0 ? (
        <p className="muted">
          {discovery.data.complete
            ? refused.length > 0
              ? `None: ${discovery.data.scannedKeys} keys scanned, every lock-shaped key the console may read is under a pattern.`
              : `None: ${discovery.data.scannedKeys} keys scanned, every lock-shaped key is under a pattern.`
            : failing.length > 0
              ? `None yet: ${discovery.data.scannedKeys} keys scanned so far.`
              : `None yet: ${discovery.data.scannedKeys} keys scanned so far (the scan is paced so a busy node does not notice it).`}
        </p>
      ) : (
        <TableScroll label="Discovered lock keys, scrollable">
          <table aria-label="Discovered lock keys">
            <TableHead columns={["Suggested pattern", "Looks like", "Keys", "Examples", isOperator && "Action"]} />
            <tbody>
              {/* A pattern is suggested once per format found under it: the same glob can head two rows. */}
              {discovery.data.candidates.map((c) => (
                <tr key={`${c.format}\u0000${c.pattern}`} aria-label={c.pattern}>
                  <th scope="row" className="mono">
                    {c.pattern}
                  </th>
                  <td>{FORMAT_LABEL[c.format]}</td>
                  <td className="mono">{c.keys}</td>
                  <td className="mono wraps">{c.examples.slice(0, 3).join(", ")}</td>
                  {isOperator && (
                    <td>
                      <button
                        type="button"
                        className="button small"
                        aria-label={`Add pattern ${c.pattern}`}
                        disabled={!canSave || current.some((p) => p.glob === c.pattern)}
                        title={canSave ? undefined : cannotSave}
                        onClick={() => save.mutate([...current, { glob: c.pattern }])}
                      >
                        Add pattern
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </section>
  );
}
