import { checkMetricsToken, scrapeMetrics } from "@/server/console-metrics";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /metrics: Prometheus text format; open, or bearer METRICS_TOKEN where set (checked, and wrong ones counted, by
// checkMetricsToken alone: the API's tokens grant nothing here, and the right scrape token is no wrong API token)
export const GET = route({ name: "GET /metrics", access: "probe" }, async ({ request }) => {
  await checkMetricsToken(request.headers);
  return scrapeMetrics(request.headers);
});
