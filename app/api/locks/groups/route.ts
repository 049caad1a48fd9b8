import { z } from "zod";
import { GROUP_SORTS } from "@/lib/locks/groups";
import { route } from "@/server/http";
import { queryText } from "@/server/query-text";
import { deploymentFilter, getLockGroups, getWatcherStatus, startLive } from "@/server/live";
import { deploymentName, offset, order, search, wholeNumber } from "@/server/live/paging-query";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z.strictObject({
  q: search.optional(),
  sort: queryText(`what to sort by (${GROUP_SORTS.join(", ")})`).pipe(z.enum(GROUP_SORTS, { error: `must be one of ${GROUP_SORTS.join(", ")}` })).optional(),
  order: order.optional(),
  offset: offset.optional(),
  limit: wholeNumber(1, 10_000).optional(),
  deployment: deploymentName.optional(),
});

// GET /api/locks/groups: one row per lock group (counts by state, contention, oldest holder, shortest TTL), of one deployment with ?deployment=
// Body: the groups' page and `nodes`, the watchers' statuses when the figures were counted (a node being read then,
// at start-up or after a reconnect, held locks the figures lack).
export const GET = route({ name: "GET /api/locks/groups", access: "viewer", query }, async ({ query: q }) => {
  const deployment = deploymentFilter(startLive(), q.deployment);
  return Response.json(
    await getLockGroups().groups(
      {
        ...(q.q ? { q: q.q } : {}),
        ...(deployment !== undefined ? { deployment } : {}),
        sort: q.sort ?? "group",
        order: q.order ?? "asc",
        offset: q.offset ?? 0,
        limit: q.limit ?? 1_000,
      },
      Date.now(),
      getWatcherStatus,
    ),
    { headers: { "Cache-Control": "no-store" } },
  );
});
