import "server-only";
import { ALREADY_HELD, LOST_END_DETAIL } from "@/lib/locks/reducer";
import type { TimelineEntry, TimelineType } from "@/lib/locks/types";
import { pushCapped } from "@/lib/locks/window";
import type { HistorySink } from "../history/recorder";

/** Timeline entries kept per resource. */
export const TIMELINE_CAP = 100;
/**
 * A timeline this short is copied to an array of its exact length for each entry added: an array grown by `push`
 * takes room for 17 entries at its first, and nearly every lock's timeline holds two or three (held, then ended).
 * 136 bytes per lock, for every lock churned through the console (ended locks are kept for their pages).
 */
const EXACT_UP_TO = 8;
/** Distinct entry texts shared (one string for every lock "by a foreign client, on 3 of 3 nodes"); forgotten when full. */
const SHARED_TEXTS = 1_000;

/** What of a lock its timeline needs (the store's entry). */
export interface TimelineOwner {
  resource: string;
  token: string | null;
  leading: string | null;
  acquiredAt: number | null;
  /** null until something happens to a lock found already held at start (saves an array per lock). */
  timeline: TimelineEntry[] | null;
}

export type TimelineItem = { at: number; type: TimelineType; node?: string; detail?: string };

/** Each lock's capped timeline, and the lock history every entry is also recorded in. */
export class Timelines {
  /**
   * Where every timeline entry is also recorded, for the lock history in PostgreSQL (null without one). It
   * only queues: the live view never waits for the database.
   */
  history: HistorySink | null = null;
  /** The deployment the lock store watches, named on every recorded event (set with the store's). */
  deployment = "default";

  /**
   * The lock's timeline, created on first use; a lock found at start begins with "already held" (at
   * `heldSince`: by default its acquisition time now).
   */
  of(owner: TimelineOwner, heldSince = owner.acquiredAt): TimelineEntry[] {
    if (owner.timeline === null) {
      owner.timeline = heldSince === null ? [] : [{ at: heldSince, type: "acquired", detail: ALREADY_HELD }];
    }
    return owner.timeline;
  }

  /** The last entries, for the lock's page. */
  latest(owner: TimelineOwner): TimelineEntry[] {
    return this.of(owner).slice(-TIMELINE_CAP);
  }

  /** `token`: the value the entry concerns; by default the one held until now (an end, an extension, a gap). */
  add(owner: TimelineOwner, item: TimelineItem, token = owner.token ?? owner.leading, heldSince = owner.acquiredAt): void {
    if (item.detail !== undefined) item.detail = this.shared(item.detail);
    const timeline = this.of(owner, heldSince);
    if (timeline.length < EXACT_UP_TO) owner.timeline = timeline.concat([item]);
    else pushCapped(timeline, item, TIMELINE_CAP);
    // A burst of failed attempts is one entry whose count grows in place: the metrics count those, not history.
    if (item.type !== "attempts") this.record(owner.resource, item, token);
  }

  /**
   * One copy of an entry's text for every lock that shows it. Texts are built per entry (holder, node counts), as
   * a chain of the parts they were joined from, and a lock kept with its timeline kept the chain and its parts.
   */
  private shared(text: string): string {
    const known = this.texts.get(text);
    if (known !== undefined) return known;
    if (this.texts.size >= SHARED_TEXTS) this.texts = new Map();
    this.texts.set(text, text);
    return text;
  }

  private texts = new Map<string, string>();

  /** Into the lock history only. */
  record(resource: string, item: TimelineItem, token: string | null): void {
    // The event object is made only where history is kept; naming the deployment is one more field of it.
    this.history?.record({ ...item, resource, token, deployment: this.deployment });
  }

  /** A failed acquisition attempt by `who`: a burst of them is one entry whose count grows. */
  addAttempt(owner: TimelineOwner, who: string, now: number): void {
    const timeline = this.of(owner);
    const last = timeline[timeline.length - 1];
    if (last && last.type === "attempts" && now - last.at < 5_000) {
      const count = Number(/^(\d+)/.exec(last.detail ?? "")?.[1] ?? "1") + 1;
      last.detail = `${count} failed attempts, last by ${who}`;
    } else {
      this.add(owner, { at: now, type: "attempts", detail: `1 failed attempt, by ${who}` });
    }
  }

  /**
   * The lock that just ended as released, expired or lost was force-released: its end entry says so, in the
   * operator's words. `token`: the value it ended with.
   */
  relabelForced(owner: TimelineOwner, detail: string | null, token: string | null): void {
    this.relabelEnd(owner, ["released", "expired", "lost"], "force-released", detail, token);
  }

  /** The lock that just ended as released was lost (a failover's promoted replica never had it): its end entry says so. */
  relabelLost(owner: TimelineOwner, token: string | null): void {
    this.relabelEnd(owner, ["released"], "lost", LOST_END_DETAIL, token);
  }

  /**
   * The last entry of one of the types `from` (the lock's end) becomes a `to`, with `detail` (none when null);
   * the lock history's record of that end is corrected too.
   */
  private relabelEnd(owner: TimelineOwner, from: readonly TimelineType[], to: TimelineType, detail: string | null, token: string | null): void {
    const last = [...this.of(owner)].reverse().find((t) => from.includes(t.type));
    if (!last) return;
    const was = last.type;
    last.type = to;
    if (detail) last.detail = detail;
    else delete last.detail;
    this.history?.record({ at: last.at, type: to, resource: owner.resource, token, deployment: this.deployment, detail, relabels: was, ...(last.node ? { node: last.node } : {}) });
  }

  /** The operator's words for an end already known to be forced. */
  rewordForced(owner: TimelineOwner, detail: string): void {
    const last = [...this.of(owner)].reverse().find((t) => t.type === "force-released");
    if (last) last.detail = detail;
  }
}
