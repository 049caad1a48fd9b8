import { E2E_OPERATOR_TOKEN, expect, test } from "./fixtures";

// Browsers read a backslash or a tab in a path as a slash: these `next` values point at another host.
for (const next of ["/%5Cevil.example", "/%09/evil.example", "/.//evil.example", "https://evil.example/"]) {
  test(`sign-in never leaves the console for next=${next}`, async ({ page, baseURL }) => {
    await page.goto(`/login?next=${next}`);
    await page.getByLabel("Token").fill(E2E_OPERATOR_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.pathname !== "/login");
    expect(new URL(page.url()).origin).toBe(new URL(baseURL ?? "").origin);
  });
}

test("sign-in goes on to a path of the console", async ({ page }) => {
  await page.goto(`/login?next=${encodeURIComponent("/audit?resource=orders")}`);
  await page.getByLabel("Token").fill(E2E_OPERATOR_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => url.pathname === "/audit");
  expect(new URL(page.url()).searchParams.get("resource")).toBe("orders");
});

test("pages hydrate under the Content-Security-Policy and report no violation", async ({ page, signIn }) => {
  const violations: string[] = [];
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
  });
  await signIn("operator");
  const response = await page.goto("/");
  expect(response?.headers()["content-security-policy"]).toMatch(/script-src 'self' 'nonce-/);
  // The node status in the header is filled in by client code: it shows only once React has hydrated.
  await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("3/3 up");
  await page.goto("/demo");
  await expect(page.getByRole("heading", { level: 1, name: "Contention lab" })).toBeVisible();
  await page.goto("/audit");
  await expect(page.getByRole("heading", { level: 1, name: "Audit log" })).toBeVisible();
  expect(violations).toEqual([]);
});
