import { z } from "zod";
import { route } from "@/server/http";
import { getStreamHub } from "@/server/live";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

const query = z.strictObject({
  // EventSource sends Last-Event-ID itself on reconnect; a page that opens a new EventSource passes it here.
  lastEventId: z.string().max(64, "must be at most 64 characters").optional(),
});

// GET /api/locks/stream: Server-Sent Events, a snapshot then coalesced lock changes, resumable with Last-Event-ID
export const GET = route({ name: "GET /api/locks/stream", access: "viewer", query }, ({ request, query: q }) => {
  const lastEventId = request.headers.get("last-event-id") ?? q.lastEventId ?? null;
  const stream = getStreamHub().open(lastEventId, request.signal);
  return new Response(stream, {
    headers: {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache, no-transform",
      Connection: "keep-alive",
      "X-Accel-Buffering": "no",
    },
  });
});
