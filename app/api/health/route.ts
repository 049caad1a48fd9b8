import { route } from "@/server/http";
import { getHealth } from "@/server/health";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/health: node reachability, quorum and notification status; open to anyone.
export const GET = route({ name: "GET /api/health", access: "probe" }, async () => {
  const health = await getHealth();
  return health;
});
