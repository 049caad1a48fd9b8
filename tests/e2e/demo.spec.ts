import { E2E_OPERATOR_TOKEN, expect, test } from "./fixtures";

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
  await expect(page.getByRole("figure", { name: "Units sold per second" }).locator("canvas")).toBeVisible();

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
  // The race without a lock sells units twice, shown in red; the fenced lock and the atomic script sell exactly.
  expect(none.value).toBeGreaterThan(0);
  expect(atomic.value).toBe(0);
  expect(fenced.value).toBe(0);
  expect(none.color).not.toBe(atomic.color);
  // Sold, then remaining: the whole stock, and nothing left.
  await expect(atomic.row.locator("td").nth(1)).toHaveText("100");
  await expect(atomic.row.locator("td").nth(2)).toHaveText("0");

  // The chart legends name the lines, and show values only while the pointer is on the chart.
  const rate = page.getByRole("figure", { name: "Units sold per second" });
  const legend = rate.locator(".u-legend");
  await expect(legend).toHaveText("sold/s", { useInnerText: true });
  await rate.locator(".u-over").hover();
  await expect(legend).toContainText(/t \(s\):?\s*\d/, { useInnerText: true });
  await expect(legend).toContainText(/sold\/s:?\s*\d/, { useInnerText: true });
  await page.getByRole("heading", { level: 1 }).hover();
  await expect(legend).toHaveText("sold/s", { useInnerText: true });

  // A run explains its own numbers: the race's lost updates, in words.
  await none.row.getByRole("button", { name: "none" }).click();
  await expect(live).toContainText("What the numbers say");
  await expect(live).toContainText(/\d+ of the \d+ sales sold a unit already sold \(lost updates\): the stock only went down by \d+/);
});

test("a viewer watches the lab but cannot start a run", async ({ page, signIn }) => {
  await signIn("viewer");
  await page.goto("/demo");
  await expect(page.getByRole("button", { name: "Run preset: The read-modify-write race" })).toBeDisabled();
  await expect(page.getByRole("table", { name: "Lab results" }).or(page.getByText("No runs yet"))).toBeVisible();
  await expect(page.getByText("Sign in with the operator token to start runs")).toBeVisible();

  // Each preset's Edit button names its preset (a screen reader lists buttons by name, out of their cards).
  await expect(page.getByRole("button", { name: "Edit", exact: true })).toHaveCount(0);
  for (const name of ["The read-modify-write race", "Naive lock with pauses", "Redlock with a node killed", "Fenced Redlock with pauses"]) {
    await expect(page.getByRole("button", { name: `Edit preset: ${name}`, exact: true })).toHaveText("Edit");
  }
  const settings = page.getByRole("form", { name: "Run settings" });
  await page.getByRole("button", { name: "Edit preset: Redlock with a node killed", exact: true }).click();
  await expect(settings.getByRole("combobox", { name: "Strategy" })).toHaveValue("redlock");
  await expect(settings.getByRole("spinbutton", { name: "Stock" })).toHaveValue("400");
  // The console started these nodes itself: its fault kills the node's process, which restarts empty.
  await expect(settings.getByRole("combobox", { name: "Kind" }).locator('option[value="kill"]')).toHaveText("kill (crash, restarts empty)");
  await page.getByRole("button", { name: "Edit preset: The read-modify-write race", exact: true }).click();
  await expect(settings.getByRole("combobox", { name: "Strategy" })).toHaveValue("none");
  await expect(settings.getByRole("spinbutton", { name: "Stock" })).toHaveValue("200");
});

test("a script drives the lab over HTTP, and the run's lock shows on the Locks page while it runs", async ({ page, request, signIn }) => {
  const auth = { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` };
  // Reading an unknown run first: each route answers with its own errors, whichever route touched the lab first.
  expect((await request.get("/api/demo/runs/rzzzzzzzzzzzz", { headers: auth })).status()).toBe(404);
  const tooMany = await request.post("/api/demo/runs", { headers: auth, data: { strategy: "redlock", stock: 10, workers: 501, ttlMs: 1000, workMs: 1 } });
  expect(tooMany.status()).toBe(422);
  expect(await tooMany.text()).toContain("workers must be at most 500");

  const started = await request.post("/api/demo/runs", { headers: auth, data: { strategy: "redlock", stock: 100_000, workers: 20, ttlMs: 2000, workMs: 20 } });
  expect(started.status()).toBe(202);
  const { id } = (await started.json()) as { id: string };
  try {
    const second = await request.post("/api/demo/runs", { headers: auth, data: { strategy: "atomic", stock: 10, workers: 1, ttlMs: 1000, workMs: 0 } });
    expect(second.status()).toBe(409);
    expect(await second.json()).toMatchObject({ error: { code: "conflict", details: { runningId: id } } });

    await signIn("viewer");
    await page.goto("/");
    const row = page.getByRole("table", { name: "Locks" }).getByRole("row", { name: `lock:lab:${id}:stock`, exact: true });
    await expect(row).toBeVisible();
    await expect(row).toContainText(`lab ${id} worker`);
  } finally {
    const cancelled = await request.delete(`/api/demo/runs/${id}`, { headers: auth });
    expect(cancelled.status()).toBe(200);
    expect(await cancelled.json()).toMatchObject({ id, status: "cancelled" });
  }
  expect((await request.delete(`/api/demo/runs/${id}`, { headers: auth })).status()).toBe(409);
});

test("a run started after the session ended says to sign in again, in the page's words", async ({ page, signIn, baseURL }) => {
  await signIn("operator");
  await page.goto("/demo");
  const start = page.getByRole("button", { name: "Start run" });
  await expect(start).toBeEnabled();
  // The session ends while the page is open (it expired, or the operator signed out in another tab).
  expect((await page.request.delete("/api/session", { headers: { Origin: new URL(baseURL ?? "http://127.0.0.1").origin } })).status()).toBe(204);
  await start.click();
  const settings = page.getByRole("region", { name: "Settings" });
  await expect(settings.getByRole("alert")).toHaveText("You are not signed in, or your session has ended: sign in again, then try once more.");
});

test("an operator runs pauses with a chance below 1% from the form", async ({ page, signIn }) => {
  await signIn("operator");
  await page.goto("/demo");
  const settings = page.getByRole("form", { name: "Run settings" });
  await settings.getByRole("combobox", { name: "Strategy" }).selectOption("atomic");
  await settings.getByRole("spinbutton", { name: "Stock" }).fill("20");
  await settings.getByRole("spinbutton", { name: "Workers" }).fill("2");
  await settings.getByRole("checkbox", { name: /Inject pauses/ }).check();
  // One order in 200 stalls: a chance the API takes (0 to 1), as the results table shows it (0.5%).
  await settings.getByRole("spinbutton", { name: "Probability per order" }).fill("0.005");
  await settings.getByRole("spinbutton", { name: "Pause (ms)" }).fill("50");
  await page.getByRole("button", { name: "Start run" }).click();
  const rows = page.getByRole("table", { name: "Lab results" }).locator("tbody tr");
  await expect(rows.filter({ hasText: "pauses 0.5% × 50 ms" }).filter({ hasText: "done" })).toHaveCount(1, { timeout: 30_000 });
});

test("the results table lists every run the lab keeps, not only the latest 20", async ({ page, request, signIn }) => {
  test.setTimeout(180_000);
  const auth = { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}` };
  const kept = async () => ((await (await request.get("/api/demo/runs", { headers: auth })).json()) as { runs: Array<{ id: string }> }).runs;
  // Short runs over HTTP, one after another (one at a time), until the lab keeps more than 20.
  while ((await kept()).length <= 20) {
    const started = await request.post("/api/demo/runs", { headers: auth, data: { strategy: "atomic", stock: 1, workers: 1, ttlMs: 1000, workMs: 0 } });
    expect(started.status(), await started.text()).toBe(202);
    const { id } = (await started.json()) as { id: string };
    await expect
      .poll(async () => ((await (await request.get(`/api/demo/runs/${id}`, { headers: auth })).json()) as { status: string }).status, { timeout: 30_000 })
      .not.toBe("running");
  }
  const runs = await kept();

  await signIn("viewer");
  await page.goto("/demo");
  const rows = page.getByRole("table", { name: "Lab results" }).locator("tbody tr");
  // Every run kept, the oldest among them: comparing runs never silently drops the earlier ones.
  await expect(rows).toHaveCount(runs.length);
  await expect(rows.last()).toHaveAttribute("data-run-id", runs.at(-1)!.id);
});

test("a keyboard user starts runs without losing focus, and is told when each run ends", async ({ page, signIn }) => {
  test.setTimeout(120_000);
  await signIn("operator");
  await page.goto("/demo");
  const live = page.getByRole("region", { name: "Live" });
  const liveHeading = live.getByRole("heading", { name: "Live" });
  const status = live.getByRole("status");

  // Start run, pressed from the keyboard, is disabled while the run lasts: focus moves on to the run, not to the page.
  const settings = page.getByRole("form", { name: "Run settings" });
  await settings.getByRole("combobox", { name: "Strategy" }).selectOption("atomic");
  await settings.getByRole("spinbutton", { name: "Stock" }).fill("50");
  await settings.getByRole("spinbutton", { name: "Workers" }).fill("5");
  await page.getByRole("button", { name: "Start run" }).focus();
  await page.keyboard.press("Enter");
  await expect(liveHeading).toBeFocused();
  await expect(status).toHaveText("The atomic run ended: done: sold out.", { timeout: 30_000 });
  await expect(liveHeading).toBeFocused();

  // A preset's Run button, the same way.
  await page.getByRole("button", { name: "Run preset: The read-modify-write race" }).focus();
  await page.keyboard.press("Enter");
  await expect(liveHeading).toBeFocused();
  await expect(status).toHaveText("The none run ended: done: sold out.", { timeout: 60_000 });
  await expect(liveHeading).toBeFocused();
});
