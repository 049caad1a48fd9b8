import { z } from "zod";
import { LOCK_STATES } from "@/lib/locks/types";
import { route } from "@/server/http";
import { locksJsonStream } from "@/server/live";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z.strictObject({
  state: z.enum(LOCK_STATES, { error: `must be one of ${LOCK_STATES.join(", ")}` }).optional(),
  limit: z.coerce.number({ error: "must be a whole number" }).int("must be a whole number").min(1, "must be at least 1").max(1_000_000, "must be at most 1000000").optional(),
});

// GET /api/locks: every lock the console sees, merged across nodes (snapshot; the stream keeps it live)
// Body: {serverTime, nodes, total, locks}, streamed so a very large snapshot never sits in memory at once.
export const GET = route({ name: "GET /api/locks", access: "viewer", query }, ({ query: q }) => {
  return new Response(locksJsonStream({ ...(q.state ? { state: q.state } : {}), ...(q.limit !== undefined ? { limit: q.limit } : {}) }), {
    headers: { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store" },
  });
});
