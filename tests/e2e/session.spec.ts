import { E2E_VIEWER_TOKEN, expect, test } from "./fixtures";

test("the header's Sign in brings the reader back to the page they were on", async ({ page }) => {
  await page.goto("/audit?resource=lock%3Aorders");
  await page.getByRole("banner").getByRole("link", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/login/);
  await page.getByLabel("Token").fill(E2E_VIEWER_TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => url.pathname !== "/login");
  expect(new URL(page.url()).pathname).toBe("/audit");
  await expect(page.getByRole("searchbox", { name: "Resource" })).toHaveValue("lock:orders");
});
