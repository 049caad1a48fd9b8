import "server-only";
import { createHash } from "node:crypto";
import { z } from "zod";
import { cursorKind, LOCK_SORTS, type LockSort, type PageCursor } from "@/lib/locks/groups";
import { queryText } from "../query-text";

/** Query fields shared by the paged lock list, the groups and the group-filtered stream. */

export const groupName = queryText("a group's name (GET /api/locks/groups lists them)").max(200, "must be at most 200 characters");
export const search = queryText("the text to look for").max(200, "must be at most 200 characters");
export const order = queryText("asc or desc").pipe(z.enum(["asc", "desc"], { error: "must be asc or desc" }));
/**
 * A whole number in a query string, written in decimal digits only (`0x10`, `1e3`, `+5` and ` 5` are refused,
 * as everywhere in the API), from `min` to `max`. However many digits it has, a number is refused by its range: one
 * too long to be in it is still a whole number, and is told its bound (it reads as Infinity at the worst, above any).
 */
export const wholeNumber = (min: number, max: number) =>
  queryText(`a whole number from ${min} to ${max}`)
    .regex(/^[0-9]+$/, "must be a whole number, in decimal digits")
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

export const offset = wholeNumber(0, 10_000_000);

/** A deployment's name, as the deployments file allows them (an unknown one is refused with the names watched). */
export const deploymentName = queryText("a deployment's name")
  .max(40, "must be at most 40 characters")
  .regex(/^[a-z0-9-]+$/, "must be a deployment's name: lower-case letters, digits or '-'");

/** A `next` as read back: where the page before ended, and the sort of the list it was made by. */
export interface GivenCursor extends PageCursor {
  /** Absent in a `next` given before the sort was written into it (its figure's kind is all it tells). */
  sort?: LockSort;
}

/**
 * The longest `after` taken: a request line longer than about 16 KiB is refused before the console reads it, so no
 * `next` may be longer (see `CURSOR_KEY_CHARS`).
 */
export const MAX_CURSOR_CHARS = 16_000;
/**
 * The most of a key a `next` carries. A lock key may be longer than any URL (Redis takes keys of megabytes): a
 * longer one is carried as its first this many characters and the SHA-256 of the whole key, and found again in
 * the list by them. In JSON a character takes at most 6 bytes (`\u0001`), in base64url 8: this part of a `next`
 * stays within 8,192 characters, with room left under `MAX_CURSOR_CHARS` for the figure sorted by.
 */
export const CURSOR_KEY_CHARS = 1_024;

/** The SHA-256 a `next` names a long key by: of the key's UTF-16 code units, so that no two keys share one. */
export const keyDigest = (resource: string): string => createHash("sha256").update(Buffer.from(resource, "utf16le")).digest("base64url");

/**
 * A page's `next`, as the API hands it out: opaque to callers (base64url of the cursor's JSON). It names the sort
 * of its list: two sorts by figures of one kind (`ttl` and `heldFor`, both numbers) would take it alike otherwise.
 * A key longer than `CURSOR_KEY_CHARS` is carried as its beginning and its digest (a fifth place).
 */
export function encodeCursor(cursor: PageCursor, sort: LockSort): string {
  const long = cursor.resource.length > CURSOR_KEY_CHARS;
  const fields = [cursor.value, long ? cursor.resource.slice(0, CURSOR_KEY_CHARS) : cursor.resource, cursor.deployment, sort, ...(long ? [keyDigest(cursor.resource)] : [])];
  return Buffer.from(JSON.stringify(fields), "utf8").toString("base64url");
}

function decodeCursor(text: string): GivenCursor | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  // (Three places: a `next` a table held across the console's upgrade, without its sort.)
  if (!Array.isArray(parsed) || parsed.length < 3 || parsed.length > 5) return null;
  const [value, resource, deployment, sort, digest] = parsed as unknown[];
  if (!(value === null || typeof value === "string" || (typeof value === "number" && Number.isFinite(value)))) return null;
  if (typeof resource !== "string" || !(deployment === null || typeof deployment === "string")) return null;
  if (parsed.length === 3) return { value, resource, deployment };
  if (typeof sort !== "string" || !(LOCK_SORTS as readonly string[]).includes(sort)) return null;
  if (parsed.length === 4) return { value, resource, deployment, sort: sort as LockSort };
  if (typeof digest !== "string" || !/^[A-Za-z0-9_-]{43}$/.test(digest) || resource.length !== CURSOR_KEY_CHARS) return null;
  return { value, resource, deployment, sort: sort as LockSort, keyDigest: digest };
}

/**
 * The key a cursor names: its own, or (a long key's beginning and digest) the one of `candidates` it was made
 * from. Where none is (the key left the list since), the page goes on from the edge of the keys that begin as it
 * did on the side the list came from (their first in ascending order, their last in `descending`): they are shown
 * again rather than one passed over.
 */
export function cursorKey(cursor: PageCursor, candidates: Iterable<string>, descending: boolean): string {
  if (cursor.keyDigest === undefined) return cursor.resource;
  for (const key of candidates) if (key.length > cursor.resource.length && key.startsWith(cursor.resource) && keyDigest(key) === cursor.keyDigest) return key;
  return descending ? `${cursor.resource}\uffff` : cursor.resource;
}

const NOT_A_CURSOR = "must be the `next` of a page of this list, as the console gave it";

/** Where to go on from: the `next` of the page before (see `PageCursor`). */
// (A cursor carries the last row's resource, a long one cut short, and, sorted by holder, its holder text.)
export const after = queryText("the `next` of the page before")
  .max(MAX_CURSOR_CHARS, `must be at most ${MAX_CURSOR_CHARS} characters: give the \`next\` of a page of this list, as the console gave it`)
  .transform((text, ctx) => {
    const cursor = decodeCursor(text);
    if (cursor === null) {
      ctx.addIssue({ code: "custom", message: NOT_A_CURSOR });
      return z.NEVER;
    }
    return cursor;
  });

/** Whether `cursor` was made by a list sorted by `sort`: as it says, and with the kind of figure that sort has. */
export function cursorFits(cursor: GivenCursor, sort: LockSort): boolean {
  if (cursor.sort !== undefined && cursor.sort !== sort) return false;
  const kind = cursorKind(sort);
  return cursor.value === null || (kind === "number" ? typeof cursor.value === "number" : kind === "text" && typeof cursor.value === "string");
}

/** Why a `next` of another sort is refused, naming the sort it is good for where it says. */
export function cursorOfAnotherSort(cursor: GivenCursor | undefined): string {
  const made = cursor?.sort === undefined ? "" : `: this one is of sort=${cursor.sort}`;
  return `${NOT_A_CURSOR} (a \`next\` is only good for the same sort${made})`;
}
