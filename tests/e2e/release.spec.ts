import { randomBytes } from "node:crypto";
import type Redis from "ioredis";
import { encodeLockValue } from "../../lib/redlock/identity";
import { E2E_OPERATOR_TOKEN, expect, lockNodeClients, test } from "./fixtures";

/** A lock held on every embedded node, as the engine would write it (label, host, pid, fence). */
async function holdLock(nodes: Redis[], resource: string, label: string, fence: string): Promise<string> {
  const value = encodeLockValue({ label, host: "e2e-host", pid: 4242, fence, acquiredAt: Date.now() });
  await Promise.all(nodes.map((n) => n.set(resource, value, "PX", 120_000)));
  return value;
}

const unique = (name: string) => `lock:e2e/${name}-${randomBytes(3).toString("hex")}`;

test.describe("force release from the browser", () => {
  let nodes: Redis[] = [];
  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
  });
  test.afterEach(() => {
    for (const n of nodes) n.disconnect();
  });

  test("an operator releases a live lock through the dialog, and the audit page shows who, why and each node", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("stuck");
    await holdLock(nodes, resource, "billing-worker", "17");

    await page.goto("/");
    const row = page.getByRole("row", { name: resource });
    await expect(row).toContainText("billing-worker");
    await row.getByRole("button", { name: "Force release" }).click();

    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await expect(dialog).toBeVisible();
    await expect(dialog).toContainText("billing-worker (e2e-host, pid 4242)");
    await expect(dialog).toContainText("17");
    await expect(dialog.getByRole("list", { name: "Nodes" }).getByRole("listitem")).toHaveCount(3);
    const release = dialog.getByRole("button", { name: "Release" });
    await expect(release).toBeDisabled();
    await dialog.getByLabel("Reason").fill("worker hung after deploy 4711");
    await release.click();
    await expect(dialog.getByRole("status")).toContainText("Released on 3 of 3 nodes");
    await dialog.getByRole("button", { name: "Close" }).click();
    await expect(dialog).toBeHidden();

    // It leaves the held locks: gone from the table, or kept only as an ended, force-released row.
    await expect(async () => {
      if ((await row.count()) > 0) await expect(row).toContainText(/force-released/);
    }).toPass();
    for (const n of nodes) expect(await n.get(resource)).toBeNull();

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click();
    await expect(page.getByRole("heading", { level: 1, name: "Audit log" })).toBeVisible();
    const entry = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource });
    await expect(entry).toHaveCount(1);
    await expect(entry).toContainText("e2e-operator");
    await expect(entry).toContainText("worker hung after deploy 4711");
    await expect(entry).toContainText("billing-worker");
    await expect(entry).toContainText("released");
    for (const id of ["node-0", "node-1", "node-2"]) await expect(entry).toContainText(`${id}: deleted`);

    await page.getByRole("searchbox", { name: "Actor" }).fill("nobody-by-this-name");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(page.getByText("No force releases recorded that match these filters.")).toBeVisible();
    await page.getByRole("button", { name: "Clear" }).click();
    await expect(entry).toHaveCount(1);
    if (process.env.UPDATE_SCREENSHOTS) await page.screenshot({ path: "docs/screenshot-audit.png", fullPage: true });

    const download = page.waitForEvent("download");
    await page.getByRole("link", { name: "Export CSV" }).click();
    const csv = await (await download).path();
    const { readFileSync } = await import("node:fs");
    expect(readFileSync(csv, "utf8")).toContain("worker hung after deploy 4711");
  });

  test("when the lock changed hands while the dialog was open, it says so, shows the new holder and deletes nothing", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("handover");
    await holdLock(nodes, resource, "old-holder", "5");
    await page.goto("/");
    const row = page.getByRole("row", { name: resource });
    await expect(row).toContainText("old-holder");
    await row.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("looks stuck");

    const newValue = await holdLock(nodes, resource, "new-holder", "6");
    await dialog.getByRole("button", { name: "Release" }).click();
    const alert = dialog.getByRole("alert");
    await expect(alert).toContainText("The lock changed hands");
    await expect(alert).toContainText("new-holder (e2e-host, pid 4242), fence 6");
    for (const n of nodes) expect(await n.get(resource)).toBe(newValue);
  });

  test("a script's release (bearer token, as with curl) shows on the audit page, with its per-node outcome", async ({ page, request, signIn }) => {
    const resource = unique("script");
    await holdLock(nodes, resource, "cron-runner", "9");
    const response = await request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
      data: { reason: "released by the on-call script" },
      headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}`, "X-Lockscope-Actor": "oncall-bot" },
    });
    expect(response.status(), await response.text()).toBe(200);
    const body = (await response.json()) as { released: boolean; auditId: string };
    expect(body.released).toBe(true);

    await signIn("viewer");
    await page.goto(`/audit?resource=${encodeURIComponent(resource)}`);
    const entry = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource });
    await expect(entry).toHaveCount(1);
    await expect(entry).toContainText("oncall-bot");
    await expect(entry).toContainText("cron-runner (e2e-host pid 4242)");
    await expect(entry).toContainText("released by the on-call script");
    await entry.getByRole("button", { name: "Details" }).click();
    await expect(page.getByText(body.auditId)).toBeVisible();
  });

  test("a viewer sees the lock but no release button, and the server refuses the release anyway", async ({ page, signIn, baseURL }) => {
    await signIn("viewer");
    const resource = unique("viewer");
    const value = await holdLock(nodes, resource, "read-only", "1");
    await page.goto("/");
    await expect(page.getByRole("row", { name: resource })).toContainText("read-only");
    await expect(page.getByRole("button", { name: "Force release" })).toHaveCount(0);

    const response = await page.request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
      data: { reason: "viewer tries anyway" },
      headers: { Origin: new URL(baseURL ?? "http://127.0.0.1").origin },
    });
    expect(response.status()).toBe(403);
    for (const n of nodes) expect(await n.get(resource)).toBe(value);
  });
});
