import { describe, expect, it } from "vitest";
import { deploymentChoices, showsDeployment } from "@/components/audit/audit-log";
import type { AuditEntry } from "@/lib/audit/types";

const entry = (deployment?: string): AuditEntry => ({
  id: "1700000000000-0a1b2c3d4e5f",
  at: 1_700_000_000_000,
  actor: "alice",
  role: "operator",
  action: deployment === undefined ? "patterns-changed" : "force-release",
  resource: "lock:orders/42",
  ...(deployment === undefined ? {} : { deployment }),
  token: null,
  holder: null,
  reason: "stuck",
  outcome: "released",
  nodes: [],
  ip: "127.0.0.1",
  userAgent: null,
});

describe("the audit table's Deployment column", () => {
  it("is shown where the console watches several deployments", () => {
    expect(showsDeployment(["orders", "cache"], [], "")).toBe(true);
    expect(showsDeployment(["orders", "cache"], [entry("orders"), entry()], "")).toBe(true);
  });

  it("is left out where one deployment is watched and the entries name no other", () => {
    expect(showsDeployment(["default"], [], "")).toBe(false);
    expect(showsDeployment(["default"], [entry("default"), entry()], "")).toBe(false);
  });

  it("is shown where the entries name a deployment other than the one watched (releases made while it watched others)", () => {
    expect(showsDeployment(["default"], [entry("default"), entry("orders")], "")).toBe(true);
    expect(showsDeployment(["orders"], [entry("cache")], "")).toBe(true);
  });

  it("is left out while the table shows one deployment's entries: every row would say the same name", () => {
    expect(showsDeployment(["orders", "cache"], [entry("cache")], "cache")).toBe(false);
    // A deployment since removed from the configuration, on a console that watches one.
    expect(showsDeployment(["default"], [entry("payments")], "payments")).toBe(false);
  });
});

describe("the audit filter's deployments", () => {
  it("offers those watched, then those the entries name besides, and the one chosen", () => {
    expect(deploymentChoices(["orders", "cache"], [entry("cache"), entry()], "")).toEqual(["orders", "cache"]);
    expect(deploymentChoices(["orders", "cache"], [entry("payments"), entry("cache"), entry("billing"), entry("payments")], "")).toEqual(["orders", "cache", "billing", "payments"]);
    expect(deploymentChoices(["default"], [entry("default"), entry("payments")], "")).toEqual(["default", "payments"]);
    expect(deploymentChoices(["default"], [], "payments")).toEqual(["default", "payments"]);
    expect(deploymentChoices(["default"], [entry("default")], "")).toEqual(["default"]);
  });
});
