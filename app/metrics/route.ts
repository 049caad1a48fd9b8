import { checkMetricsToken, scrapeMetrics } from "@/server/console-metrics";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /metrics: Prometheus text format; open, or bearer METRICS_TOKEN where set
export const GET = route({ name: "GET /metrics", access: "public" }, async ({ request }) => {
  checkMetricsToken(request.headers);
  return scrapeMetrics();
});
