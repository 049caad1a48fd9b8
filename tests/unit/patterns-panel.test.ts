import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import type * as JsxRuntime from "react/jsx-runtime";
import type * as JsxDevRuntime from "react/jsx-dev-runtime";
import { describe, expect, it, vi } from "vitest";
import { PatternsPanel } from "@/components/locks/patterns-panel";

/** The keys React was given for the rows of each table drawn (a key given twice among siblings is a fault React warns of). */
const { rowKeys, recordingKeys } = vi.hoisted(() => {
  const rowKeys = new Map<string, unknown[]>();
  type Jsx = (type: unknown, props: Record<string, unknown>, key?: unknown, ...rest: unknown[]) => unknown;
  const recordingKeys =
    (jsx: Jsx): Jsx =>
    (type, props, key, ...rest) => {
      if (type === "table" && typeof props["aria-label"] === "string") {
        const tbody = ([] as unknown[]).concat(props.children).find((c) => (c as { type?: unknown } | null)?.type === "tbody") as { props: { children: unknown } } | undefined;
        const rows = ([] as unknown[]).concat(tbody?.props.children ?? []).flat();
        rowKeys.set(props["aria-label"], rows.map((r) => (r as { key: unknown }).key));
      }
      return jsx(type, props, key, ...rest);
    };
  return { rowKeys, recordingKeys };
});
vi.mock("react/jsx-runtime", async (original) => {
  const actual = await original<typeof JsxRuntime>();
  return { ...actual, jsx: recordingKeys(actual.jsx as never), jsxs: recordingKeys(actual.jsxs as never) };
});
vi.mock("react/jsx-dev-runtime", async (original) => {
  const actual = await original<typeof JsxDevRuntime>();
  return { ...actual, jsxDEV: recordingKeys(actual.jsxDEV as never) };
});

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

  it("gives each suggestion its own row, where two formats are found under the same pattern", () => {
    const text = panel({
      scannedKeys: 40,
      complete: true,
      scannedAt: Date.now(),
      candidates: [
        { pattern: "job:*", format: "token", keys: 30, examples: ["job:a", "job:b"] },
        { pattern: "job:*", format: "redisson", keys: 10, examples: ["job:c"] },
      ],
      nodes: [{ id: "node-0", error: null, refusedKeys: 0 }],
    });
    expect(text).toContain("job:a, job:b");
    expect(text).toContain("job:c");
    const keys = rowKeys.get("Discovered lock keys");
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(2);
  });
});
