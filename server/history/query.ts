import "server-only";
import { z } from "zod";
import { pageLimit, timeBound } from "../audit/query";
import { deploymentName } from "../live/paging-query";
import { queryText } from "../query-text";
import { CURSOR_PATTERN } from "./postgres";

const fields = {
  limit: pageLimit.optional(),
  before: queryText("the `next` value of a previous page").regex(CURSOR_PATTERN, "`before` must be a `next` value from a previous page").optional(),
  from: timeBound("from").optional(),
  to: timeBound("to").optional(),
  at: timeBound("at").optional(),
};

const ordered = (q: { from?: number; to?: number; at?: number }) => q.from === undefined || q.to === undefined || q.from < q.to;
const notBoth = (q: { from?: number; to?: number; at?: number }) => q.at === undefined || (q.from === undefined && q.to === undefined);
/** How far past the console's clock `at` may be (a browser's clock a little ahead): later, it is a mistake (a mistyped year). */
export const AT_FUTURE_SLACK_MS = 5 * 60_000;
/** Who held a lock at an instant still to come is not history: the open holds would read as held then. */
const notFuture = (q: { at?: number }) => q.at === undefined || q.at <= Date.now() + AT_FUTURE_SLACK_MS;
const FUTURE_MESSAGE = "`at` is later than now: the history tells who held a lock up to now (the live view shows who holds it)";

/** `GET /api/locks/{resource}/history`: the resource's events newest first, or with `at` the holds at that instant. */
export const LockHistoryQuery = z
  // `deployment`: which deployment's lock, resolved as the other lock routes do (see docs/api.md).
  .strictObject({ ...fields, deployment: deploymentName.optional() })
  .refine(ordered, { message: "`from` must be before `to`" })
  .refine(notBoth, { message: "`at` asks who held the lock at an instant: use it without `from`/`to`" })
  .refine(notFuture, { message: FUTURE_MESSAGE });

/** `GET /api/history`: every resource's events by time range, or with `at` every hold at that instant (of one deployment with `deployment`). */
export const HistoryQuery = z
  .strictObject({ ...fields, resource: queryText("the lock's key name").max(1024, "`resource` is at most 1024 characters").optional(), deployment: deploymentName.optional() })
  .refine(ordered, { message: "`from` must be before `to`" })
  .refine(notBoth, { message: "`at` asks what was held at an instant: use it without `from`/`to`" })
  .refine(notFuture, { message: FUTURE_MESSAGE });
