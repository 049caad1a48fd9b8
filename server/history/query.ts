import "server-only";
import { z } from "zod";
import { CURSOR_PATTERN } from "./postgres";

/** A point in time: epoch milliseconds, or an ISO 8601 date/time. */
const instant = (name: string) =>
  z.string().transform((s, ctx) => {
    const ms = /^[0-9]{1,15}$/.test(s) ? Number(s) : Date.parse(s);
    if (!Number.isFinite(ms) || !/^[0-9]{1,15}$|^\d{4}-\d{2}-\d{2}/.test(s)) {
      ctx.addIssue({ code: "custom", message: `\`${name}\` must be epoch milliseconds or an ISO date such as 2025-01-31T03:12:00Z` });
      return z.NEVER;
    }
    return ms;
  });

const fields = {
  limit: z
    .string()
    .regex(/^[0-9]{1,4}$/, "`limit` must be a whole number from 1 to 500")
    .transform(Number)
    .pipe(z.number().int().min(1, "`limit` must be at least 1").max(500, "`limit` is at most 500"))
    .optional(),
  before: z.string().regex(CURSOR_PATTERN, "`before` must be a `next` value from a previous page").optional(),
  from: instant("from").optional(),
  to: instant("to").optional(),
  at: instant("at").optional(),
};

const ordered = (q: { from?: number; to?: number; at?: number }) => q.from === undefined || q.to === undefined || q.from < q.to;
const notBoth = (q: { from?: number; to?: number; at?: number }) => q.at === undefined || (q.from === undefined && q.to === undefined);

/** `GET /api/locks/{resource}/history`: the resource's events newest first, or with `at` the holds at that instant. */
export const LockHistoryQuery = z
  .strictObject(fields)
  .refine(ordered, { message: "`from` must be before `to`" })
  .refine(notBoth, { message: "`at` asks who held the lock at an instant: use it without `from`/`to`" });

/** `GET /api/history`: every resource's events by time range, or with `at` every hold at that instant. */
export const HistoryQuery = z
  .strictObject({ ...fields, resource: z.string().min(1).max(1024, "`resource` is at most 1024 characters").optional() })
  .refine(ordered, { message: "`from` must be before `to`" })
  .refine(notBoth, { message: "`at` asks what was held at an instant: use it without `from`/`to`" });
