import { z } from "zod";
import { RUN_ID_PATTERN } from "@/lib/lab/keys";
import { ApiError } from "@/server/errors";
import { route } from "@/server/http";
import { getLab } from "@/server/lab/lab";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const RunParams = z.strictObject({
  id: z.string().regex(RUN_ID_PATTERN, { error: "not a lab run id (they look like r<letters and digits>, e.g. rmh2x1k3fq8z0aa)" }),
});

// GET /api/demo/runs/[id]: one run with its progress, chart series and, once ended, its result.
export const GET = route({ name: "GET /api/demo/runs/[id]", access: "viewer", params: RunParams }, async ({ params }) => {
  const record = await getLab().get(params.id);
  if (!record) throw new ApiError("not_found", `No lab run ${params.id} in the last runs.`);
  return record;
});

// DELETE /api/demo/runs/[id]: cancel a running run; 200 with its final record, or 202 when another console runs it.
export const DELETE = route({ name: "DELETE /api/demo/runs/[id]", access: "operator", params: RunParams }, async ({ params }) => {
  const { record, pending } = await getLab().cancel(params.id);
  const { series: _series, ...rest } = record;
  return Response.json({ ...rest, cancelRequested: true }, { status: pending ? 202 : 200, headers: { "Cache-Control": "no-store" } });
});
