import "server-only";
import { z } from "zod";
import { deploymentName } from "../live/paging-query";
import { queryText } from "../query-text";
import { AUDIT_ID_PATTERN } from "./records";

function realDay(year: number, month: number, day: number): boolean {
  // (Not Date.UTC, which reads a year from 0 to 99 as 1900 to 1999.)
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  return at.getUTCFullYear() === year && at.getUTCMonth() === month - 1 && at.getUTCDate() === day;
}

/**
 * ISO 8601 as the console reads it: a day (midnight UTC), or a day and time with `Z` or an offset. A time
 * without one would be read in the server's own time zone; anything after it (`2025-01-01 (hello)`) is refused,
 * where `Date.parse` would read what it can.
 */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** A time bound: epoch milliseconds, or an ISO 8601 date/time. (The history routes take the same.) */
export const timeBound = (name: string) =>
  queryText("epoch milliseconds or an ISO date or date and time (2025-01-31T12:00:00Z)").transform((s, ctx) => {
    const ms = /^[0-9]{1,15}$/.test(s) ? Number(s) : ISO_INSTANT.test(s) ? Date.parse(s) : Number.NaN;
    if (!Number.isFinite(ms)) {
      ctx.addIssue({
        code: "custom",
        message: `\`${name}\` must be epoch milliseconds, an ISO date (2025-01-31, midnight UTC) or an ISO date and time with Z or an offset (2025-01-31T12:00:00Z)`,
      });
      return z.NEVER;
    }
    // Date.parse rolls a day the month does not have over into the next month (2025-02-30 is 2 March).
    const day = /^(\d{4})-(\d{2})-(\d{2})/.exec(s);
    if (day && !realDay(Number(day[1]), Number(day[2]), Number(day[3]))) {
      ctx.addIssue({ code: "custom", message: `\`${name}\` names a day that does not exist (${day[0]})` });
      return z.NEVER;
    }
    return ms;
  });

/** A page size from 1 to 500. */
export const pageLimit = queryText("a whole number from 1 to 500")
  .regex(/^[0-9]{1,4}$/, "`limit` must be a whole number from 1 to 500")
  .transform(Number)
  .pipe(z.number().int().min(1, "`limit` must be at least 1").max(500, "`limit` is at most 500"));

const filterFields = {
  resource: queryText("part of a lock's key name").max(1024, "`resource` is at most 1024 characters").optional(),
  actor: queryText("part of the name of who acted").max(64, "`actor` is at most 64 characters").optional(),
  // Any well-formed name: a deployment removed from the configuration is still named by its entries.
  deployment: deploymentName.optional(),
  from: timeBound("from").optional(),
  to: timeBound("to").optional(),
};

/** Where a page or an export starts: below the entry id a previous answer gave as `next` (exclusive). */
const before = queryText("an entry id from a previous page's `next`").regex(AUDIT_ID_PATTERN, "`before` must be an entry id from a previous page's `next`").optional();

/** `GET /api/audit` query: a page of entries, newest first, with optional filters. */
export const AuditListQuery = z
  .strictObject({
    limit: pageLimit.optional(),
    before,
    ...filterFields,
  })
  .refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { message: "`from` must be before `to`" });

/** `GET /api/audit/export` query: every matching entry (up to a cap) as CSV or JSON, from `before` on where given. */
export const AuditExportQuery = z
  .strictObject({
    format: queryText("csv or json").pipe(z.enum(["csv", "json"], "`format` must be csv or json")).optional(),
    before,
    ...filterFields,
  })
  .refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { message: "`from` must be before `to`" });

/** The most entries one export returns. */
export const EXPORT_MAX_ENTRIES = 10_000;

/**
 * A `from` or `to` kept in the Audit page's address, as an ISO instant for the page's inputs: read as the API reads
 * it, so a link filters the page as it filters `GET /api/audit`. "" (no filter, the input left empty) when there is
 * none or it is one the API refuses: a time without a zone would otherwise be read in this server's time zone, and a
 * day the month does not have as a day of the next.
 */
export function addressInstant(value: string | string[] | undefined): string {
  const parsed = timeBound("from").safeParse(value);
  return parsed.success ? new Date(parsed.data).toISOString() : "";
}
