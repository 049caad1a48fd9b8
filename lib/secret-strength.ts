/**
 * Whether a chosen secret (the key that signs session cookies) looks like random text of 32 bytes or more.
 * Randomness cannot be proved from one value; what can be seen is a value too short, or with too little
 * variety for its length (a word, a repeated pattern, a hex string of fewer than 32 bytes). Pure.
 */

/** @default 32 characters: 32 random bytes written as base64 are 44, as hex 64. */
export const MIN_SECRET_LENGTH = 32;

/**
 * @default 160 bits, by the variety of the value's characters (their Shannon entropy times its length). Random
 * 32 bytes measure well above it (base64: about 190 at the least, base64url 180, hex 210); 16 random bytes in hex
 * measure about 115, 24 in base64 about 140, and `passwordpasswordpasswordpassword` 88.
 */
export const MIN_SECRET_BITS = 160;

/** How to make a secret that passes, as the errors say it. */
export const MAKE_SECRET = "openssl rand -base64 32";

/** The value's bits as its characters' variety measures them: an upper bound of its true randomness. */
export function measuredBits(secret: string): number {
  const chars = [...secret];
  const counts = new Map<string, number>();
  for (const ch of chars) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let perChar = 0;
  for (const n of counts.values()) {
    const p = n / chars.length;
    perChar -= p * Math.log2(p);
  }
  return perChar * chars.length;
}

/** Why `secret` is too weak to sign session cookies, or null when it is not. Never repeats the secret. */
export function weakSecretProblem(secret: string): string | null {
  const length = [...secret].length;
  if (length < MIN_SECRET_LENGTH) return `it is ${length} characters long`;
  if (measuredBits(secret) < MIN_SECRET_BITS) {
    return "its characters vary too little for random bytes: a word or phrase, a repeated pattern or a hex string shorter than 64 characters is not 32 random bytes";
  }
  return null;
}
