import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { RedisNode } from "@/lib/redis-node";
import { expect, lockNodeClients, test } from "./fixtures";

/**
 * Node 2 failed over by hand: a replica of it (started by the test) copies its data and is made primary, and node 2
 * is made that replica's replica. The console's URL still names node 2, now a read-only replica where no lock can be
 * taken or released. Afterwards node 2 is made a primary again, its data as it was.
 */
test.describe("a lock node demoted to a replica by a manual failover", () => {
  let dir = "";
  let newPrimary: RedisNode | null = null;
  let nodes: Redis[] = [];
  let promotedClient: Redis | null = null;

  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
    const node2 = nodes[2]!;
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-e2e-demoted-"));
    newPrimary = await RedisNode.start({ dir, extraArgs: ["--replicaof", "127.0.0.1", String(node2.options.port)] });
    const promoted = new Redis(newPrimary.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    promotedClient = promoted;
    await expect.poll(async () => /master_link_status:up/.test(await promoted.info("replication")), { timeout: 20_000 }).toBe(true);
    await promoted.replicaof("NO", "ONE");
    await node2.replicaof("127.0.0.1", String(newPrimary.port));
  });

  test.afterEach(async () => {
    await nodes[2]?.replicaof("NO", "ONE");
    for (const n of nodes) n.disconnect();
    nodes = [];
    promotedClient?.disconnect();
    promotedClient = null;
    await newPrimary?.stop();
    newPrimary = null;
    rmSync(dir, { recursive: true, force: true });
  });

  test("its pill in the header tells a screen reader what it shows: a read-only replica of the new primary, not just up", async ({ page, signIn }) => {
    await signIn("viewer");
    await page.goto("/");
    const header = page.getByRole("status", { name: "Lock nodes" });
    await expect(header).toContainText("degraded");
    // Each pill is an image to a screen reader, named by its label (a label on a plain span is not read out).
    const pill = header.getByRole("img", { name: /^node-2 / });
    await expect(pill).toHaveAttribute("title", new RegExp(`a read-only replica of 127\\.0\\.0\\.1:${newPrimary!.port} now`));
    await expect(pill).toHaveAttribute("aria-label", new RegExp(`^node-2 up\\b.*a read-only replica of 127\\.0\\.0\\.1:${newPrimary!.port} now: no lock can be taken or released there`));
    // The other nodes are up, and said so alone.
    await expect(header.getByRole("img", { name: /^node-0 / })).toHaveAttribute("aria-label", "node-0 up");
  });

  test("the Nodes panel's row says the node is a read-only replica where no lock can be taken or released, and whose", async ({ page, signIn }) => {
    await signIn("viewer");
    await page.goto("/");
    const nodesTable = page.getByRole("table", { name: "Lock nodes" });
    await expect(nodesTable.getByRole("columnheader").last()).toHaveText("Replication");
    const replication = nodesTable.getByRole("row", { name: "node-2", exact: true }).getByRole("cell").last();
    const state = nodesTable.getByRole("row", { name: "node-2", exact: true }).getByRole("cell").first();
    await expect(state).toHaveText(`up, a read-only replica of 127.0.0.1:${newPrimary!.port}: no lock can be taken or released there`);
    await expect(replication).toHaveText(`⚠ a replica of 127.0.0.1:${newPrimary!.port} now, its link to it up`);
    await expect(replication).toHaveClass(/warn-text/);
    // The nodes still primaries say so as before.
    await expect(nodesTable.getByRole("row", { name: "node-0", exact: true }).getByRole("cell").last()).toHaveText("no replica");
  });
});
