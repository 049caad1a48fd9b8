/**
 * What each console writes about itself on the lock nodes every few seconds, and what it concludes from
 * the others' entries. Pure: the registry in `server/cluster/registry.ts` does the I/O.
 */
export interface ConsoleBeat {
  /** Unique per process: the name plus a random tail. */
  id: string;
  /** Host and port, as an operator would look for it. */
  name: string;
  /** `sessionSecretFingerprint` of the key that signs its session cookies. */
  secret: string;
  /** True when that key was generated into its data folder (no LOCKSCOPE_SESSION_SECRET). */
  generated: boolean;
  /**
   * Fingerprints of the operator token and of the viewer token (`"none"`: reading needs no token), keyed with the
   * session key: comparable between consoles that share it. Absent from the beats of earlier versions.
   */
  operator?: string;
  viewer?: string;
  /** Epoch ms of the beat. */
  at: number;
}

/** An entry older than this is a console that stopped without saying so. */
export const PEER_STALE_MS = 30_000;

/**
 * An entry older than this is removed from the nodes by the consoles that still beat: a console that was
 * killed (SIGKILL, out of memory, a crash loop) never removes its own, and the list is kept alive by the
 * others' beats, so without this it would grow by one entry per such stop, forever. Far beyond any clock skew
 * between consoles: a live console's entry is never removed.
 */
export const PEER_FORGET_MS = 10 * 60_000;

/** The fields of `entries` (one node's list: field → beat) that hold beats of consoles long gone. */
export function forgottenEntries(entries: Readonly<Record<string, string>>, nowMs: number): string[] {
  return Object.entries(entries)
    .filter(([, raw]) => {
      const beat = parseBeat(raw);
      // An entry this version cannot read may be a later version's: left to the list's own expiry.
      return beat !== null && nowMs - beat.at > PEER_FORGET_MS;
    })
    .map(([field]) => field);
}

export interface PeerWarning {
  /** Stable for one condition, so a warning is logged once while it lasts. */
  key: string;
  message: string;
}

export function parseBeat(raw: string): ConsoleBeat | null {
  try {
    const v = JSON.parse(raw) as Partial<ConsoleBeat>;
    if (typeof v.id !== "string" || typeof v.name !== "string" || typeof v.secret !== "string" || typeof v.generated !== "boolean" || typeof v.at !== "number") return null;
    return {
      id: v.id,
      name: v.name,
      secret: v.secret,
      generated: v.generated,
      at: v.at,
      ...(typeof v.operator === "string" ? { operator: v.operator } : {}),
      ...(typeof v.viewer === "string" ? { viewer: v.viewer } : {}),
    };
  } catch {
    return null;
  }
}

/**
 * The live other consoles, and what is wrong between them and this one for sessions to work everywhere: another
 * session key, or (with the same key) other tokens, since a session is checked against the token it was made from.
 */
export function peerWarnings(self: ConsoleBeat, beats: readonly ConsoleBeat[], nowMs: number): { peers: ConsoleBeat[]; warnings: PeerWarning[] } {
  const peers = beats.filter((b) => b.id !== self.id && nowMs - b.at < PEER_STALE_MS);
  const warnings: PeerWarning[] = [];
  for (const peer of peers) {
    if (peer.secret !== self.secret) {
      warnings.push({
        key: `mismatch:${peer.id}`,
        message:
          `console ${peer.name} signs sessions with a different key: a browser signed in on one is signed out on the other. ` +
          "Set the same LOCKSCOPE_SESSION_SECRET on every console over these lock nodes.",
      });
      continue;
    }
    // Same key: a session made on one is checked on the other against the token it was made from.
    if (self.operator && peer.operator && peer.operator !== self.operator) {
      warnings.push({
        key: `operator:${peer.id}`,
        message:
          `console ${peer.name} takes a different operator token: the token of one is refused by the other, and an operator signed in on one is signed out on the other. ` +
          "Set the same LOCKSCOPE_OPERATOR_TOKEN on every console over these lock nodes (a console without one generates its own).",
      });
    }
    if (self.viewer && peer.viewer && peer.viewer !== self.viewer) {
      const how =
        peer.viewer === "none"
          ? "lets anyone read without a viewer token, and this one asks for one: a page asks for sign-in on one and not on the other"
          : self.viewer === "none"
            ? "asks for a viewer token, and this one lets anyone read without one: a page asks for sign-in on one and not on the other"
            : "takes a different viewer token: the viewer token of one is refused by the other, and a viewer signed in on one is signed out on the other";
      warnings.push({
        key: `viewer:${peer.id}`,
        message: `console ${peer.name} ${how}. Set the same LOCKSCOPE_VIEWER_TOKEN (or none) on every console over these lock nodes.`,
      });
    }
  }
  if (self.generated && peers.length > 0) {
    warnings.push({
      key: "generated",
      message:
        `this console's session key was generated into its data folder and ${peers.length} other console(s) use the same lock nodes: ` +
        "set one LOCKSCOPE_SESSION_SECRET on all of them.",
    });
  }
  return { peers, warnings };
}
