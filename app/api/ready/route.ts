import { route } from "@/server/http";
import { getReadiness } from "@/server/readiness";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/ready: 200 once the watchers have reconciled and a quorum of nodes answers, 503 until then
export const GET = route({ name: "GET /api/ready", access: "probe" }, () => getReadiness());
