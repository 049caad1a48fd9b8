import Redis from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareAfterFailover, FAILOVER_READ_OPTIONS, type FailoverTarget } from "@/server/deployments/failover";
import { README_CONSOLE_ACL } from "../support/acl";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * A promoted primary whose ACL user for the console lacks EVAL, EVALSHA, MULTI and EXEC (as on some managed
 * services): the live view reads it with plain pipelined commands, and so must the failover's comparison, or no
 * lock lost in the failover is ever reported.
 */
describe("a failover compared on a primary that refuses scripts and MULTI", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startCluster(1);
    const acl = README_CONSOLE_ACL.replace(/ \+(multi|exec|eval|evalsha)\b/g, "");
    expect(acl).not.toMatch(/\+(multi|exec|eval)/);
    await cluster.client(0).call("ACL", "SETUSER", "lockscope", ...`${acl} >pw-no-tx`.split(" "));
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it("reports the lock the new primary lacks as lost and the one it has as held across the failover", async () => {
    const now = Date.now();
    await cluster.client(0).set("lock:kept", "holder-a", "PX", 60_000);
    const seen = [
      { resource: "lock:kept", token: "holder-a", expiresAt: now + 60_000 },
      { resource: "lock:gone", token: "holder-b", expiresAt: now + 60_000 },
    ];
    const lost: string[] = [];
    const survived: string[] = [];
    const target: FailoverTarget = { locks: () => [], noteLost: (lock) => lost.push(lock.resource), noteSurvived: (resource) => survived.push(resource), forceReleased: () => [], noteReleaseUndone: () => undefined };
    const warnings: string[] = [];
    const log = pino({ level: "info" }, { write: (line: string) => warnings.push(line) });
    const conn = new Redis({ host: "127.0.0.1", port: cluster.ports[0]!, username: "lockscope", password: "pw-no-tx", ...FAILOVER_READ_OPTIONS(500) });
    await compareAfterFailover({ deployment: "no-tx", target, log, seenAt: now }, seen, [], "old-primary:6379", `127.0.0.1:${cluster.ports[0]}`, conn, "any");
    expect({ lost, survived }, warnings.join("")).toEqual({ lost: ["lock:gone"], survived: ["lock:kept"] });
  });
});
