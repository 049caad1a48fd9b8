import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { RunForm } from "@/components/demo/run-form";
import type { RunSettings } from "@/lib/lab/settings";

const withFault: RunSettings = { strategy: "redlock", stock: 400, workers: 50, ttlMs: 1000, workMs: 5, fault: { node: 1, kind: "kill", atMs: 1000, forMs: 2500 } };

const form = (lab: { nodes: number; faultMode: "process" | "connections"; deployment?: string } | null) =>
  renderToStaticMarkup(createElement(RunForm, { initial: withFault, version: 0, lab: lab && { deployment: "default", ...lab }, disabled: false, onSubmit: () => {} }));
const options = (html: string, value: string) => [...html.matchAll(new RegExp(`<option value="${value}"[^>]*>([^<]*)<`, "g"))].map((m) => m[1]!.replaceAll("&#x27;", "'"));

describe("the lab's fault settings", () => {
  it("says a kill cuts the lab's connections where the console does not own the node's process", () => {
    const cut = form({ nodes: 3, faultMode: "connections" });
    expect(options(cut, "kill").join(" ")).not.toMatch(/restarts empty/);
    expect(options(cut, "kill")).toEqual(["kill (cuts the lab workers' connections to it; the node keeps running, with its keys)"]);
    expect(options(cut, "pause")).toEqual(["pause (holds the lab workers' commands to it; the node keeps running)"]);
  });

  it("says a kill crashes the node, which restarts empty, where the console owns its process", () => {
    const owned = form({ nodes: 3, faultMode: "process" });
    expect(options(owned, "kill")).toEqual(["kill (crash, restarts empty)"]);
    expect(options(owned, "pause")).toEqual(["pause (stops answering)"]);
  });

  it("offers the nodes the lab runs on, node 0 excepted", () => {
    expect(options(form({ nodes: 3, faultMode: "connections" }), "[0-9]+")).toEqual(["node-1", "node-2"]);
    expect(options(form({ nodes: 5, faultMode: "connections" }), "[0-9]+")).toEqual(["node-1", "node-2", "node-3", "node-4"]);
  });
});

describe("the lab's fault switch", () => {
  it("lets a fault loaded from a preset be switched off where the lab has no node to fault", () => {
    // The Redlock-with-a-node-killed preset, edited on a lab of one node: the run would be refused (fault.node),
    // so the operator must be able to untick the fault and run the rest of the settings.
    const html = form({ nodes: 1, faultMode: "connections" });
    const faultSwitch = /<input type="checkbox"[^>]*\/>\s*Node fault/.exec(html)?.[0];
    expect(faultSwitch).toBeDefined();
    expect(faultSwitch).toMatch(/checked=""/);
    expect(faultSwitch).not.toMatch(/disabled=""/);
  });
});

describe("where the lab runs", () => {
  it("names the deployment the lab runs on and its lock nodes, so a run on several deployments is not taken for another's", () => {
    // A console watching a standalone cache first and the orders Redlock set second: the lab runs on the cache (the
    // first deployment its workers reach by URL), one node, where "Redlock over every node" is one node.
    const text = form({ deployment: "cache", nodes: 1, faultMode: "connections" }).replace(/<[^>]+>/g, "");
    expect(text).toMatch(/Runs on deployment cache: 1 lock node/);
    expect(form({ deployment: "orders", nodes: 3, faultMode: "connections" }).replace(/<[^>]+>/g, "")).toMatch(/Runs on deployment orders: 3 lock nodes/);
  });
});
