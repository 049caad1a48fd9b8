import { z } from "zod";
import { route } from "@/server/http";
import { deploymentFilter, getLosses, startLive } from "@/server/live";
import { deploymentName } from "@/server/live/paging-query";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z.strictObject({ deployment: deploymentName.optional() });

// GET /api/losses: the locks nodes lost while their TTL ran (a restart without them, a failover to a replica
// without them) in the last 24 hours, newest first: whose holders may still think they hold them.
export const GET = route({ name: "GET /api/losses", access: "viewer", query }, ({ query: q }) => {
  const deployment = deploymentFilter(startLive(), q.deployment);
  return { serverTime: Date.now(), losses: getLosses(deployment) };
});
