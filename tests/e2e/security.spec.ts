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

test("a lock's page opened signed out asks only to sign in, with no history section or raw API refusal", async ({ page }) => {
  // The page knows it is signed out once the console has answered who is signed in.
  const session = page.waitForResponse((r) => new URL(r.url()).pathname === "/api/session");
  await page.goto(`/locks/${encodeURIComponent("lock:e2e/signed-out")}`);
  expect((await session).status()).toBe(401);
  const main = page.getByRole("main");
  await expect(main.getByText("Sign in to see locks.")).toBeVisible();
  await expect(main.getByRole("link", { name: "Sign in" })).toBeVisible();
  await expect(page.getByRole("heading", { name: "Recorded history" })).toHaveCount(0);
  await expect(page.getByRole("heading", { name: "Who held it at…" })).toHaveCount(0);
  await expect(page.getByRole("form", { name: "Who held it at a given time" })).toHaveCount(0);
  await expect(main.getByRole("alert")).toHaveCount(0);
  await expect(main).not.toContainText("Authorization: Bearer");
  await expect(main).not.toContainText("Nothing recorded yet.");
});

test("the audit page opened signed out asks only to sign in, with no who-held-it form or raw API refusal", async ({ page }) => {
  // Whether the audit log's filters ever showed, even for a moment before the refusal came.
  await page.addInitScript(() => {
    new MutationObserver(() => {
      if (document.querySelector('form[aria-label="Filter the audit log"]')) (window as unknown as { sawFilters?: boolean }).sawFilters = true;
    }).observe(document, { childList: true, subtree: true });
  });
  // The page knows it is signed out once the console has answered who is signed in.
  const session = page.waitForResponse((r) => new URL(r.url()).pathname === "/api/session");
  await page.goto("/audit");
  expect((await session).status()).toBe(401);
  const main = page.getByRole("main");
  await expect(main.getByText("Reading the audit log needs the viewer or operator token")).toBeVisible();
  await expect(main.getByRole("link", { name: "sign in", exact: true })).toBeVisible();
  await expect(page.getByRole("heading", { name: "Who held what, when" })).toHaveCount(0);
  await expect(page.getByRole("form", { name: "Who held it at a given time" })).toHaveCount(0);
  await expect(main.getByRole("alert")).toHaveCount(0);
  await expect(main).not.toContainText("Authorization: Bearer");
  expect(await page.evaluate(() => (window as unknown as { sawFilters?: boolean }).sawFilters ?? false)).toBe(false);
});

test("signed out, the locks page keeps its one heading, Locks, as a group's page does", async ({ page }) => {
  for (const path of ["/", "/?group=lock%3Aorders"]) {
    await page.goto(path);
    await expect(page.getByRole("main").getByText("Sign in to see locks."), path).toBeVisible();
    await expect(page.getByRole("heading", { level: 1 }), path).toHaveCount(1);
    await expect(page.getByRole("heading", { level: 1 }), path).toHaveText("Locks");
  }
});

test("signed out, a lock's page keeps its one heading, the lock's name", async ({ page }) => {
  const resource = "lock:e2e/signed-out-heading";
  await page.goto(`/locks/${encodeURIComponent(resource)}`);
  await expect(page.getByRole("main").getByText("Sign in to see locks.")).toBeVisible();
  await expect(page.getByRole("heading", { level: 1 })).toHaveCount(1);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(resource);
});

test("a lock's page is titled with the lock's name, signed out or in, so its tab and a screen reader say which lock", async ({ page, signIn }) => {
  const resource = "lock:e2e/titled/orders 42";
  const path = `/locks/${encodeURIComponent(resource)}`;
  await page.goto(path);
  await expect(page.getByRole("main").getByText("Sign in to see locks.")).toBeVisible();
  await expect(page).toHaveTitle(`${resource} · Lockscope`);
  await signIn("viewer");
  await page.goto(path);
  await expect(page.getByRole("main").getByRole("alert")).toBeVisible();
  await expect(page).toHaveTitle(`${resource} · Lockscope`);
});
