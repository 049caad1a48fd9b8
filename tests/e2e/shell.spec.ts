import { expect, test } from "./fixtures";

test("the shell shows navigation and three embedded lock nodes up", async ({ page, signIn }) => {
  await signIn("viewer");
  await page.goto("/");
  const nav = page.getByRole("navigation", { name: "Main" });
  await expect(nav.getByRole("link", { name: "Locks" })).toHaveAttribute("aria-current", "page");
  await expect(nav.getByRole("link", { name: "Demo" })).toBeVisible();
  await expect(nav.getByRole("link", { name: "Audit" })).toBeVisible();
  const nodes = page.getByRole("status", { name: "Lock nodes" });
  await expect(nodes).toContainText("3/3 up");
  await expect(nodes.getByRole("img", { name: "node-0 up", exact: true })).toBeVisible();
  await nav.getByRole("link", { name: "Audit" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Audit log" })).toBeVisible();
});

test("health answers the contract's shape without credentials", async ({ request }) => {
  const response = await request.get("/api/health");
  expect(response.status()).toBe(200);
  const body = (await response.json()) as { status: string; quorum: { size: number; up: number; ok: boolean }; nodes: Array<{ url: string }> };
  expect(body.quorum).toEqual({ size: 2, up: 3, ok: true });
  expect(body.nodes).toHaveLength(3);
  for (const node of body.nodes) expect(node.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
});

test("every page has the console's icon, so the browser asks for no missing favicon", async ({ page, signIn }) => {
  const missing: string[] = [];
  page.on("response", (response) => {
    if (response.status() === 404) missing.push(response.url());
  });
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  await signIn("viewer");
  for (const path of ["/", "/audit", "/demo", "/login"]) {
    await page.goto(path);
    const icon = page.locator("head link[rel='icon']").first();
    await expect(icon).toHaveAttribute("href", /\S/);
    const href = await icon.getAttribute("href");
    const served = await page.request.get(new URL(href ?? "", page.url()).toString());
    expect(served.status(), `${path}: ${href}`).toBe(200);
    expect(served.headers()["content-type"]).toContain("image/svg+xml");
    expect(await served.text()).toContain("<svg");
  }
  expect(missing).toEqual([]);
  expect(errors).toEqual([]);
});
