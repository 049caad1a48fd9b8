import { z } from "zod";
import { runSettingsSchema } from "@/lib/lab/settings";
import { route } from "@/server/http";
import { queryText } from "@/server/query-text";
import { getLab } from "@/server/lab/lab";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const ListQuery = z.strictObject({
  limit: queryText("a whole number from 1 to 50")
    // (Any number of digits: one too long is refused by its range below, not as "not a whole number".)
    .regex(/^[0-9]+$/, "limit must be a whole number, in decimal digits")
    .transform(Number)
    .pipe(z.number().min(1, "limit must be at least 1").max(50, "limit must be at most 50 (the lab keeps its last 50 runs)"))
    .default(50),
});

// GET /api/demo/runs: the lab's recent runs, newest first (the last 50, shared by every console instance), and what a run would run on.
export const GET = route({ name: "GET /api/demo/runs", access: "viewer", query: ListQuery }, async ({ query }) => ({
  runs: await getLab().list(query.limit),
  lab: getLab().info(),
}));

// POST /api/demo/runs: start a contention-lab run (one at a time per console); 202 with its id.
export const POST = route({ name: "POST /api/demo/runs", access: "operator", body: runSettingsSchema }, async ({ body, principal }) => {
  const record = await getLab().start(body, principal?.actor ?? "operator");
  return Response.json({ id: record.id }, { status: 202, headers: { "Cache-Control": "no-store", Location: `/api/demo/runs/${record.id}` } });
});
