import { z } from "zod";
import { route } from "@/server/http";
import { deploymentFilter, deploymentNames, getLosses, startLive } from "@/server/live";
import { deploymentName } from "@/server/live/paging-query";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z.strictObject({ deployment: deploymentName.optional() });

// GET /api/losses: the locks nodes lost while their TTL ran (a restart without them, a failover to a replica
// without them) in the last 24 hours, newest first: whose holders may still think they hold them.
export const GET = route({ name: "GET /api/losses", access: "viewer", query }, ({ query: q }) => {
  const view = startLive();
  const deployment = deploymentFilter(view, q.deployment);
  return { serverTime: Date.now(), deployments: deploymentNames(view), losses: getLosses(deployment) };
});
