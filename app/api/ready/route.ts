import { route } from "@/server/http";
import { getReadiness } from "@/server/readiness";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/ready: 200 once the watchers have read the nodes that answer (at least one), quorum or not; 503 until then and while shutting down
export const GET = route({ name: "GET /api/ready", access: "probe" }, () => getReadiness());
