import "server-only";
import { ApiError } from "../errors";
import { watchedDeploymentNames } from "../nodes";
import { getAuditStore } from "./current";
import { EXPORT_MAX_ENTRIES } from "./query";
import { auditCsv } from "./records";
import { AuditReadError } from "./store";
import type { AuditAnswer, AuditFilters, AuditPage } from "./types";

async function read(limit: number, before: string | undefined, filters: AuditFilters): Promise<AuditPage> {
  try {
    return await getAuditStore().list({ limit, before, filters });
  } catch (error) {
    if (error instanceof AuditReadError) throw new ApiError("unavailable", error.message);
    throw error;
  }
}

/**
 * The filters as the store applies them. Any deployment's name is taken, watched or not: releases made on a
 * deployment since removed from the configuration still name it, and are found by it (a name no entry carries
 * finds none). The only deployment of a console of one filters nothing (as on every route that takes
 * `deployment`), so its entries recorded before deployments were named, and its pattern changes, are still listed.
 */
function storeFilters(filters: AuditFilters): AuditFilters {
  if (filters.deployment === undefined) return filters;
  const names = watchedDeploymentNames();
  return names.length === 1 && names[0] === filters.deployment ? { ...filters, deployment: undefined } : filters;
}

export async function getAuditPage(options: { limit: number; before?: string; filters: AuditFilters }): Promise<AuditAnswer> {
  const filters = storeFilters(options.filters);
  return { ...(await read(options.limit, options.before, filters)), deployments: watchedDeploymentNames() };
}

/**
 * A download of every matching entry older than `before` (all of them without it), newest first, capped at
 * EXPORT_MAX_ENTRIES. Where it was cut, the response says so and gives the cursor the next export starts from
 * (`X-Audit-Next`, and `next` in JSON): a long log is exported in parts, none twice, none missed.
 */
export async function exportAudit(format: "csv" | "json", filters: AuditFilters, before?: string): Promise<Response> {
  const { entries, next, source, missingNodes } = await read(EXPORT_MAX_ENTRIES, before, storeFilters(filters));
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const headers: Record<string, string> = {
    "Cache-Control": "no-store",
    "X-Audit-Source": source,
    "X-Audit-Truncated": next ? "true" : "false",
    ...(next ? { "X-Audit-Next": next } : {}),
    // Fewer than a quorum of nodes read: entries other consoles wrote may be missing.
    ...(missingNodes ? { "X-Audit-Missing-Nodes": missingNodes.join(",") } : {}),
  };
  if (format === "csv") {
    return new Response(auditCsv(entries), {
      headers: { ...headers, "Content-Type": "text/csv; charset=utf-8", "Content-Disposition": `attachment; filename="lockscope-audit-${stamp}.csv"` },
    });
  }
  return new Response(JSON.stringify({ entries, truncated: next !== null, next, source, ...(missingNodes ? { missingNodes } : {}) }, null, 2), {
    headers: { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Disposition": `attachment; filename="lockscope-audit-${stamp}.json"` },
  });
}
