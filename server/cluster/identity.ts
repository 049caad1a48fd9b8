import "server-only";
import { createHmac } from "node:crypto";
import os from "node:os";
import { getSecrets } from "../auth";
import { getConfig } from "../config";
import { singleton } from "../global";

/** How this console names itself to the others: host name and port, which an operator can find. */
export function consoleName(): string {
  return singleton("console-name", () => `${os.hostname()}:${getConfig().port}`);
}

/**
 * Tells session secrets apart without showing them: a keyed hash of a fixed text under the secret,
 * truncated to 96 bits. Equal secrets give equal fingerprints; the secret cannot be read back from it.
 */
export function sessionSecretFingerprint(secret: Buffer): string {
  return createHmac("sha256", secret).update("lockscope session-secret fingerprint").digest().subarray(0, 12).toString("base64url");
}

export function ownSessionSecretFingerprint(): string {
  return sessionSecretFingerprint(getSecrets().sessionSecret);
}

/**
 * Tells the tokens this console takes from another console's, for consoles that share a session key (a session
 * is checked against the token it was made from): keyed hashes under the session key, so whoever reads the nodes
 * can test no guess of a token with them. `viewer` is `"none"` when reading needs no token.
 */
export function ownTokenFingerprints(): { operator: string; viewer: string } {
  const { operatorToken, viewerToken, sessionSecret } = getSecrets();
  const fingerprint = (role: string, token: string) =>
    createHmac("sha256", sessionSecret).update(`lockscope ${role}-token fingerprint:${token}`).digest().subarray(0, 12).toString("base64url");
  return { operator: fingerprint("operator", operatorToken), viewer: viewerToken === null ? "none" : fingerprint("viewer", viewerToken) };
}

/** True when no LOCKSCOPE_SESSION_SECRET is set and the secret was generated into the data folder. */
export function sessionSecretGenerated(): boolean {
  return getConfig().sessionSecret === null;
}
