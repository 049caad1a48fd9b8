import { getDiscovery } from "@/server/discovery";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/discovery: lock-shaped keys outside the patterns found by the background scan, grouped by a suggested glob, and when it ran
export const GET = route({ name: "GET /api/discovery", access: "viewer" }, () => ({ ...getDiscovery().result(), serverTime: Date.now() }));
