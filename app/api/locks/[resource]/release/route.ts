import { z } from "zod";
import { KEY_TOO_LONG_TO_OPEN, MAX_ADDRESSED_KEY_CHARS } from "@/lib/locks/types";
import { requireRole } from "@/server/auth";
import { route } from "@/server/http";
import { deploymentName } from "@/server/live/paging-query";
import { releaseLock } from "@/server/release";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const Params = z.strictObject({
  resource: z.string().min(1, "the resource (lock key) is required").max(MAX_ADDRESSED_KEY_CHARS, KEY_TOO_LONG_TO_OPEN),
});

const Query = z.strictObject({
  // Which deployment's lock, where the console watches several and the resource is held on more than one.
  deployment: deploymentName.optional(),
});

const Body = z.strictObject({
  reason: z
    .string("the reason must be text")
    .trim()
    .min(3, "say why in at least 3 characters")
    .max(500, "the reason is at most 500 characters")
    .refine((s) => !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(s), "the reason must not contain control characters"),
  token: z
    .string("the token must be text (the lock value you saw)")
    .min(1, "the token, when given, must not be empty")
    .max(4096, "the token is at most 4096 characters")
    .optional(),
});

// POST /api/locks/[resource]/release: force-release, audited
export const POST = route(
  { name: "POST /api/locks/[resource]/release", access: "operator", params: Params, query: Query, body: Body },
  ({ params, query, body, principal, request }) =>
    releaseLock({
      resource: params.resource,
      ...(query.deployment !== undefined ? { deployment: query.deployment } : {}),
      reason: body.reason,
      token: body.token,
      principal: requireRole(principal, "operator"),
      request,
    }),
);
