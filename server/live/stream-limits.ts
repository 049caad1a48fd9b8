import "server-only";
import { brand, instanceOf } from "../global";

/** Who opens a stream: the client address, and a fingerprint of its credential (null for open reading). */
export interface StreamOwner {
  address: string;
  credential: string | null;
  /** A session cookie's id and expiry: its stream ends when it is signed out or expires. */
  session?: { id: string; expiresAtMs: number } | null;
}

export interface StreamLimitSettings {
  perAddress: number;
  perCredential: number;
}

/** A stream refused because its owner already has as many open as allowed. */
export class StreamLimitError extends Error {
  static readonly [brand] = "StreamLimitError";
  static override [Symbol.hasInstance](value: unknown): value is StreamLimitError {
    return instanceOf(this, value);
  }

  constructor(
    readonly scope: "address" | "credential",
    readonly limit: number,
  ) {
    super(
      scope === "address"
        ? `Too many live streams from this address (at most ${limit} at once): close another tab or wait for one to end.`
        : `Too many live streams with this token (at most ${limit} at once): close another tab or wait for one to end.`,
    );
    this.name = "StreamLimitError";
  }
}

/**
 * Counts open streams per address and per credential. `take` refuses (throws) past a limit, else returns
 * the release function, which is idempotent.
 */
export class StreamLimits {
  private readonly byAddress = new Map<string, number>();
  private readonly byCredential = new Map<string, number>();

  constructor(private readonly settings: StreamLimitSettings) {}

  take(owner: StreamOwner): () => void {
    if ((this.byAddress.get(owner.address) ?? 0) >= this.settings.perAddress) throw new StreamLimitError("address", this.settings.perAddress);
    if (owner.credential !== null && (this.byCredential.get(owner.credential) ?? 0) >= this.settings.perCredential) {
      throw new StreamLimitError("credential", this.settings.perCredential);
    }
    bump(this.byAddress, owner.address, 1);
    if (owner.credential !== null) bump(this.byCredential, owner.credential, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      bump(this.byAddress, owner.address, -1);
      if (owner.credential !== null) bump(this.byCredential, owner.credential, -1);
    };
  }

  /** Open streams for this owner's address and credential (tests, diagnostics). */
  count(owner: StreamOwner): { address: number; credential: number } {
    return { address: this.byAddress.get(owner.address) ?? 0, credential: owner.credential === null ? 0 : (this.byCredential.get(owner.credential) ?? 0) };
  }
}

function bump(map: Map<string, number>, key: string, delta: number): void {
  const next = (map.get(key) ?? 0) + delta;
  // Keys with no stream left are dropped, so the maps hold only current owners.
  if (next <= 0) map.delete(key);
  else map.set(key, next);
}
