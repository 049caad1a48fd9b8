import "server-only";
import { z } from "zod";
import { cursorKind, LOCK_SORTS, type LockSort, type PageCursor } from "@/lib/locks/groups";
import { queryText } from "../query-text";

/** Query fields shared by the paged lock list, the groups and the group-filtered stream. */

export const groupName = queryText("a group's name (GET /api/locks/groups lists them)").max(200, "must be at most 200 characters");
export const search = queryText("the text to look for").max(200, "must be at most 200 characters");
export const order = queryText("asc or desc").pipe(z.enum(["asc", "desc"], { error: "must be asc or desc" }));
/**
 * A whole number in a query string, written in decimal digits only (`0x10`, `1e3`, `+5` and ` 5` are refused,
 * as everywhere in the API), from `min` to `max`.
 */
export const wholeNumber = (min: number, max: number) =>
  queryText(`a whole number from ${min} to ${max}`)
    .regex(/^[0-9]{1,10}$/, "must be a whole number, in decimal digits")
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
 * A page's `next`, as the API hands it out: opaque to callers (base64url of the cursor's JSON). It names the sort
 * of its list: two sorts by figures of one kind (`ttl` and `heldFor`, both numbers) would take it alike otherwise.
 */
export function encodeCursor(cursor: PageCursor, sort: LockSort): string {
  return Buffer.from(JSON.stringify([cursor.value, cursor.resource, cursor.deployment, sort]), "utf8").toString("base64url");
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
  if (!Array.isArray(parsed) || (parsed.length !== 3 && parsed.length !== 4)) return null;
  const [value, resource, deployment, sort] = parsed as unknown[];
  if (!(value === null || typeof value === "string" || (typeof value === "number" && Number.isFinite(value)))) return null;
  if (typeof resource !== "string" || !(deployment === null || typeof deployment === "string")) return null;
  if (parsed.length === 3) return { value, resource, deployment };
  if (typeof sort !== "string" || !(LOCK_SORTS as readonly string[]).includes(sort)) return null;
  return { value, resource, deployment, sort: sort as LockSort };
}

const NOT_A_CURSOR = "must be the `next` of a page of this list, as the console gave it";

/** Where to go on from: the `next` of the page before (see `PageCursor`). */
// (A cursor carries the last row's resource and, sorted by holder, its holder text: as long as the request line
// the server takes, not a shorter cap that would stop a table scrolling past a long key.)
export const after = queryText("the `next` of the page before")
  .max(16_000, "must be at most 16000 characters")
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
