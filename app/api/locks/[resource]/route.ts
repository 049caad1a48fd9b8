import { z } from "zod";
import { lockReplication } from "@/server/deployments/replication";
import { ApiError } from "@/server/errors";
import { route } from "@/server/http";
import { getLockStore, isLockKey } from "@/server/live";
import { getPatternStore } from "@/server/patterns";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const params = z.strictObject({
  resource: z.string().min(1, "must not be empty").max(1024, "must be at most 1024 characters"),
});

// GET /api/locks/[resource]: one lock with its nodes, holder, TTL, timeline, contention history and replication
export const GET = route({ name: "GET /api/locks/[resource]", access: "viewer", params }, async ({ params: p }) => {
  if (!isLockKey(p.resource)) {
    const patterns = getPatternStore().current().patterns.map((x) => x.glob);
    throw new ApiError(
      "not_found",
      `\`${p.resource.slice(0, 200)}\` is not a lock key: it matches none of the lock patterns (${patterns.join(", ")}). Add a pattern for it (PUT /api/patterns, or "Lock patterns and discovery" on the locks page).`,
    );
  }
  const lock = getLockStore().get(p.resource);
  if (!lock) throw new ApiError("not_found", `No node holds \`${p.resource.slice(0, 200)}\` and it has no recent history: it was released or expired, or never taken.`);
  return { serverTime: Date.now(), ...lock, replication: await lockReplication(p.resource) };
});
