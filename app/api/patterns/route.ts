import { route } from "@/server/http";
import { changePatterns, getPatternStore, putPatternsSchema } from "@/server/patterns";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// GET /api/patterns: the lock patterns in force, with any scope declared per pattern.
export const GET = route({ name: "GET /api/patterns", access: "viewer" }, () => getPatternStore().current());

// PUT /api/patterns: replaces the lock patterns at once, audited; kept across restarts.
export const PUT = route({ name: "PUT /api/patterns", access: "operator", body: putPatternsSchema }, ({ body, principal, request }) => {
  if (!principal) throw new Error("operator routes always have a principal");
  return changePatterns({ patterns: body.patterns, reason: body.reason, revision: body.revision, principal, request });
});
