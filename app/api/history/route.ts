import { checkRecordedKey, historyEvents, historyHeldAt } from "@/server/history/service";
import { HistoryQuery } from "@/server/history/query";
import { route } from "@/server/http";
import { deploymentNames, namedDeployment, startLive } from "@/server/live";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/history: every lock's recorded events by time range newest first (keyset pages), or with `at` every hold at that instant
export const GET = route({ name: "GET /api/history", access: "viewer", query: HistoryQuery }, async ({ query }) => {
  checkRecordedKey(query.resource);
  const view = startLive();
  const deployment = query.deployment === undefined ? undefined : namedDeployment(view, query.deployment).deployment;
  const deployments = deploymentNames(view);
  const limit = query.limit ?? 100;
  if (query.at !== undefined) return { ...(await historyHeldAt({ at: query.at, resource: query.resource, deployment, limit, before: query.before })), deployments };
  return { ...(await historyEvents({ limit, before: query.before, filters: { resource: query.resource, deployment, from: query.from, to: query.to } })), deployments };
});
