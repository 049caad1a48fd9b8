import { z } from "zod";
import { KEY_TOO_LONG_TO_OPEN, MAX_ADDRESSED_KEY_CHARS } from "@/lib/locks/types";
import { lockReplication } from "@/server/deployments/replication";
import { ApiError } from "@/server/errors";
import { route } from "@/server/http";
import { getLockGroups, getLockStore, isLockKey, resolveDeployment, startLive, unreadNodes } from "@/server/live";
import { deploymentName } from "@/server/live/paging-query";
import { notALockKey } from "@/server/patterns";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const params = z.strictObject({
  resource: z.string().min(1, "must not be empty").max(MAX_ADDRESSED_KEY_CHARS, KEY_TOO_LONG_TO_OPEN),
});

const query = z.strictObject({
  // Which deployment's lock, where the console watches several and the resource is a lock on more than one.
  deployment: deploymentName.optional(),
});

// GET /api/locks/[resource]: one lock with its nodes, holder, TTL, timeline, contention history and replication
export const GET = route({ name: "GET /api/locks/[resource]", access: "viewer", params, query }, async ({ params: p, query: q }) => {
  if (!isLockKey(p.resource)) throw new ApiError("not_found", notALockKey(p.resource));
  const view = startLive();
  const deployment = resolveDeployment(view, p.resource, q.deployment)?.deployment ?? q.deployment;
  const lock = deployment === undefined ? null : getLockStore().get(p.resource, Date.now(), deployment);
  if (!lock) {
    const where = q.deployment !== undefined ? ` on deployment \`${q.deployment}\`` : view.multi ? ` on any deployment (${view.runtimes.map((r) => r.deployment).join(", ")})` : "";
    const shown = `\`${p.resource.slice(0, 200)}\``;
    // "No node holds it" is said only of nodes the console has read: one it has not may hold it.
    const { unread, of } = unreadNodes(q.deployment);
    const names = unread.slice(0, 10).join(", ");
    if (unread.length > 0 && unread.length === of) {
      throw new ApiError("unavailable", `No lock node${where} has been read yet (${names}: see /api/health for why), so whether ${shown} is held cannot be said now; try again in a moment.`, { unread });
    }
    if (unread.length > 0) {
      throw new ApiError("not_found", `No node the console has read${where} holds ${shown} and it has no recent history; ${names} ${unread.length === 1 ? "has" : "have"} not been read (see /api/health), and may hold it.`, { unread });
    }
    throw new ApiError("not_found", `No node${where} holds ${shown} and it has no recent history: it was released or expired, or never taken.`);
  }
  // `group`: the lock's group (as the grouped view names it), whose stream a lock's page follows.
  return { serverTime: Date.now(), ...lock, group: getLockGroups().groupOf(p.resource), replication: await lockReplication(p.resource, lock.deployment) };
});
