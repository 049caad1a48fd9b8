import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { PatternsPanel } from "@/components/locks/patterns-panel";

/** The panel as first drawn with these answers of `/api/discovery` (and one pattern, for a viewer). */
function panel(discovery: { scannedKeys: number; complete: boolean; scannedAt: number | null; candidates: unknown[]; nodes: Array<{ id: string; error: string | null }> }): string {
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
        { id: "node-0", error: null },
        { id: "node-1", error: "not connected" },
        { id: "node-2", error: "NOPERM this user has no permissions to access one of the keys used as arguments" },
      ],
    });
    expect(text).toContain("node-1: its scan failed (not connected); node-2: its scan failed (NOPERM this user has no permissions to access one of the keys used as arguments).");
    expect(text).toContain("They are scanned again from the start every 5 s");
    expect(text).not.toContain("the scan is paced so a busy node does not notice it");
  });

  it("says nothing of failures while every node's scan goes on", () => {
    const text = panel({ scannedKeys: 200, complete: false, scannedAt: null, candidates: [], nodes: [{ id: "node-0", error: null }] });
    expect(text).toContain("None yet: 200 keys scanned so far (the scan is paced so a busy node does not notice it).");
    expect(text).not.toContain("failed");
  });
});
