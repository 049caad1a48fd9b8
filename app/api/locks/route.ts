import { z } from "zod";
import { LOCK_SORTS } from "@/lib/locks/groups";
import { LOCK_STATES } from "@/lib/locks/types";
import { route } from "@/server/http";
import { queryText } from "@/server/query-text";
import { deploymentFilter, getLockGroups, getWatcherStatus, locksJsonStream, startLive } from "@/server/live";
import { after, cursorFits, cursorOfAnotherSort, deploymentName, groupName, offset, order, search, wholeNumber, type GivenCursor } from "@/server/live/paging-query";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/** A page of the paged list holds at most this many locks. */
const MAX_PAGE = 1_000;

const query = z
  .strictObject({
    state: queryText(`a lock state (${LOCK_STATES.join(", ")})`).pipe(z.enum(LOCK_STATES, { error: `must be one of ${LOCK_STATES.join(", ")}` })).optional(),
    limit: wholeNumber(1, 1_000_000).optional(),
    group: groupName.optional(),
    q: search.optional(),
    sort: queryText(`what to sort by (${LOCK_SORTS.join(", ")})`).pipe(z.enum(LOCK_SORTS, { error: `must be one of ${LOCK_SORTS.join(", ")}` })).optional(),
    order: order.optional(),
    offset: offset.optional(),
    after: after.optional(),
    deployment: deploymentName.optional(),
  })
  .refine((q) => !isPaged(q) || q.limit === undefined || q.limit <= MAX_PAGE, { message: `must be at most ${MAX_PAGE} with group, q, sort, order, offset or after`, path: ["limit"] })
  .refine((q) => q.offset === undefined || q.after === undefined, { message: "give offset or after, not both", path: ["after"] })
  .refine((q) => q.after === undefined || cursorFits(q.after, q.sort ?? "resource"), { error: (issue) => cursorOfAnotherSort((issue.input as { after?: GivenCursor }).after), path: ["after"] });

function isPaged(q: { group?: string; q?: string; sort?: string; order?: string; offset?: number; after?: unknown }): boolean {
  return q.group !== undefined || q.q !== undefined || q.sort !== undefined || q.order !== undefined || q.offset !== undefined || q.after !== undefined;
}

const JSON_HEADERS = { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store" };

// GET /api/locks: every lock the console sees, merged across nodes (snapshot; the stream keeps it live)
// Body: {serverTime, nodes, total, locks}, streamed so a very large snapshot never sits in memory at once. With
// group, q, sort, order, offset or after: one page of the matching locks, searched and sorted over all of them
// (`next` goes on from where it ended). With deployment: that deployment's locks only.
export const GET = route({ name: "GET /api/locks", access: "viewer", query }, async ({ query: q }) => {
  const deployment = deploymentFilter(startLive(), q.deployment);
  if (isPaged(q)) {
    const page = await getLockGroups().page({
      ...(q.group !== undefined ? { group: q.group } : {}),
      ...(deployment !== undefined ? { deployment } : {}),
      ...(q.q !== undefined ? { q: q.q } : {}),
      ...(q.state ? { state: q.state } : {}),
      sort: q.sort ?? "resource",
      order: q.order ?? "asc",
      offset: q.offset ?? 0,
      ...(q.after !== undefined ? { after: q.after } : {}),
      limit: q.limit ?? 100,
    });
    return new Response(JSON.stringify({ serverTime: page.serverTime, nodes: getWatcherStatus(), total: page.total, offset: page.offset, locks: page.locks, next: page.next }), { headers: JSON_HEADERS });
  }
  return new Response(
    locksJsonStream({ ...(q.state ? { state: q.state } : {}), ...(q.limit !== undefined ? { limit: q.limit } : {}), ...(deployment !== undefined ? { deployment } : {}) }),
    { headers: JSON_HEADERS },
  );
});
