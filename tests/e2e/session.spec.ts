import type { Page } from "@playwright/test";
import { E2E_OPERATOR_TOKEN, E2E_VIEWER_TOKEN, expect, test } from "./fixtures";

/** Signs in on the sign-in page, once it has hydrated (the header's node status is filled in by client code). */
async function signInOnPage(page: Page, token: string): Promise<void> {
  await expect(page).toHaveURL(/\/login/);
  await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("up");
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => url.pathname !== "/login");
}

test("the header's Sign in brings the reader back to the page they were on", async ({ page }) => {
  await page.goto("/audit?resource=lock%3Aorders");
  // (The link goes back to the page once the page has hydrated: its node status is filled in by client code.)
  await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("up");
  await page.getByRole("banner").getByRole("link", { name: "Sign in" }).click();
  await signInOnPage(page, E2E_VIEWER_TOKEN);
  expect(new URL(page.url()).pathname).toBe("/audit");
  await expect(page.getByRole("searchbox", { name: "Resource" })).toHaveValue("lock:orders");
});

test("signing out and in again, as an operator, comes back to the page the viewer was on", async ({ page, signIn }) => {
  await signIn("viewer");
  await page.goto("/audit?resource=lock%3Aorders");
  await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("up");
  await page.getByRole("banner").getByRole("button", { name: "Sign out" }).click();
  await signInOnPage(page, E2E_OPERATOR_TOKEN);
  expect(new URL(page.url()).pathname + new URL(page.url()).search).toBe("/audit?resource=lock%3Aorders");
  await expect(page.getByRole("banner").getByLabel("Signed in as")).toContainText("(operator)");
});

test("signed out, a shared audit search or a group's page asks to sign in and then shows what the link named", async ({ page }) => {
  for (const [path, link, back] of [
    ["/audit?resource=lock%3Aorders", "sign in", async () => expect(page.getByRole("searchbox", { name: "Resource" })).toHaveValue("lock:orders")],
    ["/?group=lock%3Aorders", "Sign in", async () => expect(page.getByRole("heading", { level: 2, name: "lock:orders" })).toBeVisible()],
  ] as const) {
    await page.context().clearCookies();
    await page.goto(path);
    await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("up");
    await page.getByRole("main").getByRole("link", { name: link, exact: true }).click();
    await signInOnPage(page, E2E_VIEWER_TOKEN);
    expect(new URL(page.url()).pathname + new URL(page.url()).search, path).toBe(path);
    await back();
  }
});

test("once the session has ended, the header stops naming the signed-in operator and offers Sign in", async ({ page, signIn, baseURL }) => {
  await signIn("operator");
  await page.goto("/");
  const signedInAs = page.getByRole("banner").getByLabel("Signed in as");
  await expect(signedInAs).toHaveText("e2e-operator (operator)");
  // Signed out in another tab (or the session expired): the cookie this tab has no longer counts.
  const ended = await page.request.delete("/api/session", { headers: { Origin: new URL(baseURL ?? "http://127.0.0.1").origin } });
  expect(ended.status()).toBe(204);
  await expect(page.getByRole("main").getByText("Sign in to see locks.")).toBeVisible({ timeout: 30_000 });
  await expect(signedInAs).toHaveCount(0);
  await expect(page.getByRole("banner").getByRole("link", { name: "Sign in" })).toBeVisible();
});

test("a token typed or filled in before the sign-in page came alive still signs in", async ({ page }) => {
  // The page's scripts held back until the token is in the field, as on a slow connection or with a password manager.
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route((url) => url.pathname.startsWith("/_next/static/") && url.pathname.endsWith(".js"), async (route) => {
    await held;
    await route.continue();
  });
  await page.goto("/login?next=%2Faudit", { waitUntil: "commit" });
  await page.getByLabel("Token").fill(E2E_VIEWER_TOKEN);
  release();
  await expect(page.getByRole("status", { name: "Lock nodes" })).toContainText("up");
  await expect(page.getByRole("button", { name: "Sign in" })).toBeEnabled();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => url.pathname === "/audit");
  await expect(page.getByRole("banner").getByLabel("Signed in as")).toContainText("(viewer)");
});

test("a sign-out the console did not confirm says so and leaves the page as it was, rather than showing the sign-in page", async ({ page, signIn }) => {
  await signIn("operator");
  await page.goto("/audit");
  const signedInAs = page.getByRole("banner").getByLabel("Signed in as");
  await expect(signedInAs).toHaveText("e2e-operator (operator)");
  // The console answers the sign-out with an error (or the connection drops): the session was not ended.
  await page.route("**/api/session", (route) =>
    route.request().method() === "DELETE"
      ? route.fulfill({ status: 500, contentType: "application/json", body: JSON.stringify({ error: { code: "internal", message: "Something went wrong on the server." } }) })
      : route.continue(),
  );
  await page.getByRole("banner").getByRole("button", { name: "Sign out" }).click();
  await expect(page.getByRole("banner").getByRole("alert")).toContainText("Not signed out");
  expect(new URL(page.url()).pathname).toBe("/audit");
  await expect(signedInAs).toHaveText("e2e-operator (operator)");
  await page.route("**/api/session", (route) => (route.request().method() === "DELETE" ? route.abort("connectionreset") : route.continue()));
  await page.getByRole("banner").getByRole("button", { name: "Sign out" }).click();
  await expect(page.getByRole("banner").getByRole("alert")).toContainText("Not signed out");
  // Once the console answers, signing out goes on to the sign-in page as before.
  await page.unrouteAll();
  await page.getByRole("banner").getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL((url) => url.pathname === "/login");
});

test("the sign-in page says where this console's tokens come from: here both are set by environment variables, and neither is shown", async ({ page }) => {
  await page.goto("/login");
  const main = page.getByRole("main");
  await expect(main.getByRole("heading", { name: "Sign in" })).toBeVisible();
  await expect(main.locator("p").first()).toHaveText(
    "Use the operator token, the one set in LOCKSCOPE_OPERATOR_TOKEN where the console runs, or the viewer token (LOCKSCOPE_VIEWER_TOKEN) to read only.",
  );
  // Neither token, nor any word of a generated one printed at start and kept in a file.
  const html = await page.content();
  expect(html).not.toContain(E2E_OPERATOR_TOKEN);
  expect(html).not.toContain(E2E_VIEWER_TOKEN);
  await expect(main).not.toContainText("printed");
  await expect(main).not.toContainText("operator-token");
});
