import "server-only";
import { FORCE_HINT_MS, type ForceHint } from "@/lib/locks/reducer";

/** Force-releases remembered at most (the oldest go first). */
const MAX_HINTS = 10_000;
/** A repeated notice of the same force-release (it arrives by pub/sub too) within this long adds nothing without words. */
const REPEAT_MS = 2_000;

export interface ForceReleaseInfo {
  value?: string | null;
  actor?: string | null;
  reason?: string | null;
}

/** The operator's words for a force-release: who and why, null when neither is known. */
export function forceReleaseDetail(info: ForceReleaseInfo): string | null {
  return [info.actor ? `by ${info.actor}` : null, info.reason ? `“${info.reason.slice(0, 200)}”` : null].filter(Boolean).join(": ") || null;
}

/**
 * Operators' force-releases noted per resource (here or on another console), so that keys that vanish shortly
 * after end as `force-released` with the operator's words (see `forceHintApplies` in lib/locks/reducer.ts).
 */
export class ForceHints {
  /** Oldest first. */
  private readonly hints = new Map<string, ForceHint>();

  /**
   * Notes a force-release of `resource`; false when it repeats one just noted and adds nothing. `aside`: see
   * `ForceHint.aside` (kept from an earlier note of the same value: a note made after the release finds it gone).
   */
  note(resource: string, value: string | null | undefined, detail: string | null, now: number, aside = false): boolean {
    const existing = this.hints.get(resource);
    if (existing && now - existing.at < REPEAT_MS && !detail) return false;
    const noted = value ?? existing?.value ?? null;
    const hint: ForceHint = { at: now, value: noted, detail: detail ?? existing?.detail ?? null };
    if (aside || (existing?.aside === true && existing.value === noted)) hint.aside = true;
    this.hints.set(resource, hint);
    if (this.hints.size > MAX_HINTS) {
      const first = this.hints.keys().next().value;
      if (first !== undefined) this.hints.delete(first);
    }
    return true;
  }

  get(resource: string): ForceHint | null {
    return this.hints.get(resource) ?? null;
  }

  /** Used once (see `LockStep.forceHintTaken`). */
  delete(resource: string): void {
    this.hints.delete(resource);
  }

  /** Forgets the hints too old to explain an end. */
  sweep(now: number): void {
    for (const [resource, hint] of this.hints) {
      if (now - hint.at > FORCE_HINT_MS) this.hints.delete(resource);
      else break;
    }
  }

  get size(): number {
    return this.hints.size;
  }
}
