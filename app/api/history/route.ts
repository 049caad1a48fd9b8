import { historyEvents, historyHeldAt } from "@/server/history/service";
import { HistoryQuery } from "@/server/history/query";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/history: every lock's recorded events by time range newest first (keyset pages), or with `at` every hold at that instant
export const GET = route({ name: "GET /api/history", access: "viewer", query: HistoryQuery }, ({ query }) => {
  const limit = query.limit ?? 100;
  if (query.at !== undefined) return historyHeldAt({ at: query.at, resource: query.resource, limit, before: query.before });
  return historyEvents({ limit, before: query.before, filters: { resource: query.resource, from: query.from, to: query.to } });
});
