import net from "node:net";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { SentinelFailoverMonitor, type FailoverTarget } from "@/server/deployments/failover";

/** A local port nothing listens on: the comparison's read fails at once (and is logged), which is all this needs. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("Sentinel failovers compared", () => {
  it("compares each failover once, a failover back and forth within a minute too (A→B, B→A, A→B)", async () => {
    const [a, b] = [await closedPort(), await closedPort()];
    // Each comparison takes the console's view once, when it starts.
    let views = 0;
    const target: FailoverTarget = {
      locks: () => {
        views += 1;
        return [];
      },
      noteLost: () => undefined,
      noteSurvived: () => undefined,
      forceReleased: () => [],
      noteReleaseUndone: () => undefined,
    };
    const deployment = { name: "once", kind: "sentinel" as const, sentinels: [], master: "locks", tls: null, auth: { username: null, passwordFile: null }, sentinelAuth: { username: null, passwordFile: null } };
    const monitor = new SentinelFailoverMonitor(deployment, target, pino({ level: "silent" }), 200);
    const primary = (port: number) => ({ host: "127.0.0.1", port });
    const change = (from: number, to: number) => ({ from: `127.0.0.1:${from}`, to: primary(to), runIdBefore: null, runIdAfter: null });

    monitor.primaryReached(change(a, b));
    // The same failover seen again (the sentinels' announcement after the watcher reached B): not compared twice.
    monitor.primaryReached(change(a, b));
    expect(views).toBe(1);
    monitor.primaryReached(change(b, a));
    expect(views).toBe(2);
    monitor.primaryReached(change(a, b));
    expect(views).toBe(3);
    await monitor.stop();
  });
});
