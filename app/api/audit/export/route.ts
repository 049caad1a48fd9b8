import { exportAudit } from "@/server/audit/service";
import { AuditExportQuery } from "@/server/audit/query";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/audit/export: every matching audit entry (up to 10 000, older than `before` where given) as a CSV or JSON download.
export const GET = route({ name: "GET /api/audit/export", access: "viewer", query: AuditExportQuery }, ({ query }) =>
  exportAudit(query.format ?? "json", { resource: query.resource, actor: query.actor, deployment: query.deployment, from: query.from, to: query.to }, query.before),
);
