import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { PatternsPanel } from "@/components/locks/patterns-panel";

/** The panel as first drawn with these answers of `/api/discovery` (and one pattern, for a viewer). */
function panel(discovery: { scannedKeys: number; complete: boolean; scannedAt: number | null; candidates: unknown[]; nodes: Array<{ id: string; error: string | null; refusedKeys: number }> }): string {
  const client = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  client.setQueryData(["session"], { role: "viewer", actor: "viewer", via: "bearer", viewerTokenRequired: true });
  client.setQueryData(["patterns"], { patterns: [{ glob: "lock:*" }], source: "config", updatedAt: null, updatedBy: null, revision: "config" });
  client.setQueryData(["discovery"], { ...discovery, serverTime: Date.now() });
  const html = renderToStaticMarkup(createElement(QueryClientProvider, { client }, createElement(PatternsPanel)));
  return html.replace(/<[^>]+>/g, "").replaceAll("&#x27;", "'");
}

describe("the discovery part of the lock patterns panel", () => {
  it("says which node's scan fails, and why, rather than a scan on its way", () => {
    const text = panel({
      scannedKeys: 200,
      complete: false,
      scannedAt: null,
      candidates: [],
      nodes: [
        { id: "node-0", error: null, refusedKeys: 0 },
        { id: "node-1", error: "not connected", refusedKeys: 0 },
        { id: "node-2", error: "ERR unknown command 'evalsha', with args beginning with: [redacted]", refusedKeys: 0 },
      ],
    });
    expect(text).toContain("node-1: its scan failed (not connected); node-2: its scan failed (ERR unknown command 'evalsha', with args beginning with: [redacted]).");
    expect(text).toContain("They are scanned again from the start every 5 s");
    expect(text).not.toContain("the scan is paced so a busy node does not notice it");
  });

  it("says nothing of failures while every node's scan goes on", () => {
    const text = panel({ scannedKeys: 200, complete: false, scannedAt: null, candidates: [], nodes: [{ id: "node-0", error: null, refusedKeys: 0 }] });
    expect(text).toContain("None yet: 200 keys scanned so far (the scan is paced so a busy node does not notice it).");
    expect(text).not.toContain("failed");
  });

  it("says how many keys a node's ACL kept it from looking at, rather than that every lock-shaped key is under a pattern", () => {
    const text = panel({
      scannedKeys: 304,
      complete: true,
      scannedAt: Date.now(),
      candidates: [],
      nodes: [
        { id: "node-0", error: null, refusedKeys: 301 },
        { id: "node-1", error: null, refusedKeys: 0 },
      ],
    });
    expect(text).toContain("Not looked at: 301 keys on node-0, which the node's ACL does not let the console's Redis user read.");
    expect(text).toContain("None: 304 keys scanned, every lock-shaped key the console may read is under a pattern.");
    expect(text).not.toContain("failed");
  });
});
