import { z } from "zod";
import { KEY_TOO_LONG_TO_OPEN, MAX_ADDRESSED_KEY_CHARS } from "@/lib/locks/types";
import { ApiError } from "@/server/errors";
import { checkRecordedKey, historyEvents, historyHeldAt, historyRecorded } from "@/server/history/service";
import { LockHistoryQuery } from "@/server/history/query";
import { route } from "@/server/http";
import { deploymentNames, historyDeployment, isLockKey, namedDeployment, startLive } from "@/server/live";
import { notALockKey } from "@/server/patterns";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const params = z.strictObject({
  resource: z.string().min(1, "must not be empty").max(MAX_ADDRESSED_KEY_CHARS, KEY_TOO_LONG_TO_OPEN),
});

// GET /api/locks/[resource]/history: the lock's recorded events newest first (keyset pages), or with `at` who held it then
export const GET = route({ name: "GET /api/locks/[resource]/history", access: "viewer", params, query: LockHistoryQuery }, async ({ params: p, query }) => {
  if (!isLockKey(p.resource)) throw new ApiError("not_found", notALockKey(p.resource));
  checkRecordedKey(p.resource);
  const view = startLive();
  // A lock is (deployment, resource): its history is that deployment's only, resolved as the lock's page is. Where no
  // history is recorded there is none to choose between: the answer says so (a name given is still checked).
  const deployment = historyRecorded()
    ? historyDeployment(view, p.resource, query.deployment)
    : query.deployment === undefined
      ? undefined
      : namedDeployment(view, query.deployment).deployment;
  const deployments = deploymentNames(view);
  const limit = query.limit ?? 100;
  if (query.at !== undefined) return { ...(await historyHeldAt({ at: query.at, resource: p.resource, deployment, limit, before: query.before })), deployments };
  return { ...(await historyEvents({ limit, before: query.before, filters: { resource: p.resource, deployment, from: query.from, to: query.to } })), deployments };
});
