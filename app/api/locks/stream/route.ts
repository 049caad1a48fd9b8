import { z } from "zod";
import { ApiError } from "@/server/errors";
import { route } from "@/server/http";
import { queryText } from "@/server/query-text";
import { deploymentFilter, getStreamHub, startLive, streamOwner } from "@/server/live";
import { NO_LOCKS } from "@/server/live/hub";
import { deploymentName, groupName } from "@/server/live/paging-query";
import { StreamLimitError } from "@/server/live/stream-limits";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z
  .strictObject({
    // EventSource sends Last-Event-ID itself on reconnect; a page that opens a new EventSource passes it here.
    lastEventId: queryText("the id of the last event received").max(64, "must be at most 64 characters").optional(),
    // One group's locks only (GET /api/locks/groups names them); locks=none: nodes and stats, no lock at all;
    // locks=changes: a snapshot without lock rows, then the changes (a page that pages its rows from GET /api/locks).
    group: groupName.optional(),
    locks: queryText("all, none or changes").pipe(z.enum(["all", "none", "changes"], { error: "must be all, none or changes" })).optional(),
    // One deployment's locks only (where the console watches several).
    deployment: deploymentName.optional(),
    // encoding=compact: each lock as an array of its fields (lib/locks/compact-lock.ts), about half the bytes.
    encoding: queryText("full or compact").pipe(z.enum(["full", "compact"], { error: "must be full or compact" })).optional(),
  })
  .refine((q) => !(q.group !== undefined && q.locks === "none"), { message: "give either group or locks=none, not both", path: ["locks"] });

const STREAM_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
};

// GET /api/locks/stream: Server-Sent Events, a snapshot then coalesced lock changes (of one group with ?group=,
// of one deployment with ?deployment=), resumable with Last-Event-ID
export const GET = route({ name: "GET /api/locks/stream", access: "viewer", query }, ({ request, query: q, principal }) => {
  const lastEventId = request.headers.get("last-event-id") ?? q.lastEventId ?? null;
  const deployment = deploymentFilter(startLive(), q.deployment) ?? null;
  let stream: ReadableStream<Uint8Array>;
  try {
    const group = q.locks === "none" ? NO_LOCKS : (q.group ?? null);
    stream = getStreamHub().open(lastEventId, request, streamOwner(request.headers, principal), group, deployment, q.locks !== "changes", q.encoding === "compact");
  } catch (error) {
    if (error instanceof StreamLimitError) throw new ApiError("rate_limited", error.message, { limit: error.limit, per: error.scope }, { "Retry-After": "10" });
    throw error;
  }
  return new Response(stream, { headers: STREAM_HEADERS });
});

// HEAD /api/locks/stream: the stream's headers, without opening a stream (Next.js would otherwise run GET,
// and nobody would ever read or cancel that stream); refused as GET would be (a deployment not watched: 400)
export const HEAD = route({ name: "HEAD /api/locks/stream", access: "viewer", query }, ({ query: q }) => {
  deploymentFilter(startLive(), q.deployment);
  return new Response(null, { headers: STREAM_HEADERS });
});
