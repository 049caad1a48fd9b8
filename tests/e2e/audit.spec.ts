import { expect, lockNodeClients, test } from "./fixtures";
import { releasedByScript, unique } from "./scene";

test.describe("the audit page", () => {
  // A browser in another time zone than the console's (which runs in this machine's).
  test.use({ timezoneId: Intl.DateTimeFormat().resolvedOptions().timeZone === "Asia/Kathmandu" ? "America/New_York" : "Asia/Kathmandu" });

  test("a time filter kept in the address shows the same times and entries after a reload, in the browser's time zone", async ({ page, request, signIn }) => {
    const nodes = await lockNodeClients(request);
    const resource = unique("audit-window");
    try {
      await releasedByScript(request, nodes, resource, "oncall-bot", "checking the time filter");
    } finally {
      for (const n of nodes) n.disconnect();
    }
    await signIn("viewer");
    await page.goto(`/audit?resource=${encodeURIComponent(resource)}`);
    const entry = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource });
    await expect(entry).toHaveCount(1);
    // This console watches one deployment: no Deployment column or filter, which would say the same name everywhere.
    await expect(page.getByRole("table", { name: "Audit entries" }).getByRole("columnheader", { name: "Deployment" })).toHaveCount(0);
    await expect(page.getByRole("combobox", { name: "Deployment" })).toHaveCount(0);
    // From a minute before the release, as the browser's clock reads it.
    const at = Number((await entry.getAttribute("data-audit-id"))?.split("-")[0]);
    // Its time names the browser's zone: it is read against logs and alerts written in other zones.
    const zone = await page.evaluate((ms) => new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(ms).find((p) => p.type === "timeZoneName")?.value ?? "", at);
    expect(zone).toMatch(/^GMT[+-]|^[A-Z]{3,4}$/);
    await expect(entry.getByRole("cell").first()).toContainText(` ${zone}`);
    const from = await page.evaluate((ms) => {
      const d = new Date(ms - 60_000);
      const two = (n: number) => String(n).padStart(2, "0");
      return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
    }, at);
    await page.getByLabel("From").fill(from);
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(entry).toHaveCount(1);

    // The address keeps the filter: reloaded (or sent to a colleague), the page shows the same window.
    await page.reload();
    await expect(page.getByLabel("From")).toHaveValue(from);
    await expect(entry).toHaveCount(1);
    await expect(page.getByText("No force releases or pattern changes recorded")).toHaveCount(0);
  });

  test("each entry's Details button and node list say which entry they are about, so a screen reader tells the rows apart", async ({ page, request, signIn }) => {
    const nodes = await lockNodeClients(request);
    const prefix = unique("details");
    const resources = [`${prefix}/a`, `${prefix}/b`];
    try {
      for (const resource of resources) await releasedByScript(request, nodes, resource, "oncall-bot", "checking the details buttons");
    } finally {
      for (const n of nodes) n.disconnect();
    }
    await signIn("viewer");
    await page.goto(`/audit?resource=${encodeURIComponent(prefix)}`);
    const table = page.getByRole("table", { name: "Audit entries" });
    const names: string[] = [];
    for (const resource of resources) {
      const row = table.getByRole("row").filter({ hasText: resource });
      await expect(row).toHaveCount(1);
      // The entry as its row shows it: the release of that lock, at the time in its first cell.
      const entry = `the release of ${resource} at ${(await row.getByRole("cell").first().textContent()) ?? ""}`;
      await expect(row.getByRole("button", { name: `Details of ${entry}`, exact: true })).toBeVisible();
      await expect(row.getByRole("list", { name: `Per-node outcome of ${entry}`, exact: true })).toBeVisible();
      names.push(`Details of ${entry}`);
    }
    expect(new Set(names).size).toBe(resources.length);
    await expect(table.getByRole("button", { name: "Details", exact: true })).toHaveCount(0);
    // Opened from the keyboard, the button says it is open, and which entry it would hide.
    const first = names[0] ?? "";
    await table.getByRole("button", { name: first, exact: true }).focus();
    await page.keyboard.press("Enter");
    const hide = table.getByRole("button", { name: first.replace(/^Details/, "Hide details"), exact: true });
    await expect(hide).toHaveAttribute("aria-expanded", "true");
    await expect(hide).toBeFocused();
  });

  test("what Apply filters or Clear found is read out once the answer is there, as the table changes silently", async ({ page, request, signIn }) => {
    const nodes = await lockNodeClients(request);
    const resource = unique("announced");
    try {
      await releasedByScript(request, nodes, resource, "oncall-bot", "checking what the filters say");
    } finally {
      for (const n of nodes) n.disconnect();
    }
    await signIn("viewer");
    await page.goto("/audit");
    await expect(page.getByRole("table", { name: "Audit entries" }).getByRole("row").nth(1)).toBeVisible();
    const said = page.getByRole("main").getByRole("status").filter({ hasText: /^Filter/ });
    // Nothing is read out before the operator asks.
    await expect(said).toHaveCount(0);
    const box = page.getByRole("searchbox", { name: "Resource" });
    await box.fill(resource);
    await box.press("Enter");
    await expect(said).toHaveText(/^Filtered: 1 entry shown/);
    await box.fill(unique("never-released"));
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(said).toHaveText(/^Filtered: .*match these filters/);
    await page.getByRole("button", { name: "Clear" }).click();
    await expect(said).toHaveText(/^Filters cleared: \d+ entr(y|ies) shown/);
  });

  test("Load older entries, pressed from the keyboard, keeps focus while it loads, then moves it to the first older entry and says how many came", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    const nodes = await lockNodeClients(request);
    const prefix = unique("older");
    const resource = (i: number) => `${prefix}/${String(i).padStart(2, "0")}`;
    // A page (50) and three older entries, released one after the other: entry 02 is the newest of the older ones.
    try {
      for (let i = 0; i < 53; i++) await releasedByScript(request, nodes, resource(i), "oncall-bot", "checking the older entries");
    } finally {
      for (const n of nodes) n.disconnect();
    }
    await signIn("viewer");
    // The older page is held back until the test lets it through, to look at the page while it loads.
    let letThrough: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letThrough = resolve));
    await page.route(/\/api\/audit\?.*before=/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(`/audit?resource=${encodeURIComponent(prefix)}`);
    const rows = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: prefix });
    await expect(rows).toHaveCount(50);
    const said = page.getByRole("main").getByRole("status").filter({ hasText: /older entr/ });
    await expect(said).toHaveCount(0);

    // (Named "Loading older entries…" while it loads.)
    const more = page.getByRole("button", { name: /^Load(ing)? older entries/ });
    await expect(more).toHaveText("Load older entries");
    await more.focus();
    await page.keyboard.press("Enter");
    // Loading, the button stays where it was, focused, and says it cannot be pressed again yet.
    await expect(more).toHaveAttribute("aria-disabled", "true");
    await expect(more).toBeFocused();
    await page.keyboard.press("Enter");
    await expect(more).toBeFocused();
    letThrough();

    await expect(rows).toHaveCount(53);
    await expect(rows.filter({ hasText: resource(2) })).toBeFocused();
    await expect(said).toHaveText("3 older entries loaded. No older entries are left.");
    await expect(more).toHaveCount(0);
  });

  test("filters the console refuses say why, and offer no export that would only fail", async ({ page, signIn }) => {
    await signIn("viewer");
    await page.goto("/audit");
    await page.getByLabel("From", { exact: true }).fill("2026-03-02T10:00:00");
    await page.getByLabel("To", { exact: true }).fill("2026-03-01T10:00:00");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(page.getByRole("main").getByRole("alert")).toContainText("must be before");
    const filters = page.getByRole("form", { name: "Filter the audit log" });
    await expect(filters.getByRole("link", { name: /^Export/ })).toHaveCount(0);
    await expect(filters.getByRole("button", { name: "Export CSV" })).toBeDisabled();
    await expect(filters.getByRole("button", { name: "Export JSON" })).toBeDisabled();
    // Corrected, they are offered again.
    await page.getByRole("button", { name: "Clear" }).click();
    await expect(filters.getByRole("link", { name: "Export CSV" })).toBeVisible();
  });
});
