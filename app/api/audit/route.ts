import { getAuditPage } from "@/server/audit/service";
import { AuditListQuery } from "@/server/audit/query";
import { route } from "@/server/http";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/audit: a page of audit entries, newest first, filtered by resource, actor, deployment and time range.
export const GET = route({ name: "GET /api/audit", access: "viewer", query: AuditListQuery }, ({ query }) =>
  getAuditPage({
    limit: query.limit ?? 50,
    before: query.before,
    filters: { resource: query.resource, actor: query.actor, deployment: query.deployment, from: query.from, to: query.to },
  }),
);
