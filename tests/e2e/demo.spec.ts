import { expect, test } from "./fixtures";

const STRATEGIES = ["none", "naive", "redlock", "redlock-fenced", "atomic"];

test("an operator runs every strategy side by side and reads the comparison", async ({ page, signIn }) => {
  test.setTimeout(240_000);
  await signIn("operator");
  await page.goto("/demo");
  await expect(page.getByRole("heading", { level: 1, name: "Contention lab" })).toBeVisible();

  await page.getByRole("button", { name: "Run preset: All strategies side by side" }).click();
  const progress = page.getByRole("progressbar", { name: "Run progress" });
  await expect(progress).toBeVisible();
  const live = page.getByRole("region", { name: "Live" });
  await expect(live).toContainText("Run 1 of 5");
  await expect(page.getByRole("figure", { name: "Orders per second" }).locator("canvas")).toBeVisible();

  // The last run of the batch ends with its progress bar full.
  await expect(live).toContainText("Run 5 of 5", { timeout: 180_000 });
  await expect(live).toContainText("atomic");
  await expect(progress).toHaveAttribute("aria-valuenow", "100", { timeout: 60_000 });

  const table = page.getByRole("table", { name: "Lab results" });
  const rows = table.locator("tbody tr");
  await expect(rows.filter({ hasText: "done" })).toHaveCount(5, { timeout: 30_000 });
  // Newest first: the five runs of the batch, atomic on top.
  const strategies = await rows.locator("th").allInnerTexts();
  expect(strategies.slice(0, 5)).toEqual([...STRATEGIES].reverse());

  const lostUpdates = async (strategy: string) => {
    const row = rows.filter({ has: page.locator("th", { hasText: new RegExp(`^${strategy}$`) }) }).first();
    const cell = row.locator('td[data-label="lost updates"]');
    return { value: Number(await cell.innerText()), color: await cell.evaluate((el) => getComputedStyle(el).color), row };
  };
  const none = await lostUpdates("none");
  const atomic = await lostUpdates("atomic");
  const fenced = await lostUpdates("redlock-fenced");
  // The seeds' race sells units twice, shown in red; the fenced lock and the atomic script sell exactly.
  expect(none.value).toBeGreaterThan(0);
  expect(atomic.value).toBe(0);
  expect(fenced.value).toBe(0);
  expect(none.color).not.toBe(atomic.color);
  // Sold, then remaining: the whole stock, and nothing left.
  await expect(atomic.row.locator("td").nth(1)).toHaveText("100");
  await expect(atomic.row.locator("td").nth(2)).toHaveText("0");
});

test("a viewer watches the lab but cannot start a run", async ({ page, signIn }) => {
  await signIn("viewer");
  await page.goto("/demo");
  await expect(page.getByRole("button", { name: "Run preset: The seeds' race" })).toBeDisabled();
  await expect(page.getByRole("table", { name: "Lab results" }).or(page.getByText("No runs yet"))).toBeVisible();
  await expect(page.getByText("Sign in with the operator token to start runs")).toBeVisible();
});
