import { Writable } from "node:stream";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";

/**
 * What the console's log keeps of a Redis command that failed: the route, the error's name, code, message and
 * stack, never the command's arguments (a lock token, a holder's value, a release's reason, a password sent with
 * AUTH). ioredis hangs the command and its arguments on every reply error, and Redis itself repeats the first
 * arguments of a command it does not know ("unknown command 'publish', with args beginning with: …"). The nodes
 * here have PUBLISH renamed away, as a service that offers no pub/sub does.
 */
describe("the console's log of a failed Redis command", () => {
  let cluster: TestCluster;
  let admin: Redis;
  const lines: Array<Record<string, unknown>> = [];
  const PASSWORD = "hunter2-log-secret-0123";

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOG_LEVEL: "debug" }, extraArgs: ["--rename-command", "PUBLISH", ""] });
    admin = cluster.client(0);
    await admin.call("ACL", "SETUSER", "lockscope", "on", ">the-right-password-0123", "~*", "+@all");
    // The console's own logger (its serializers and redaction), written where the test can read it.
    const { createLogger } = await import("@/server/logger");
    const { setGlobal } = await import("@/server/global");
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    setGlobal("logger", createLogger("debug", stream));
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("an error no route expected: logged with the route, its name, message and stack, without the command's arguments", async () => {
    const { route } = await import("@/server/http");
    // A route whose command fails in a way nothing maps to an answer: AUTH with a wrong password.
    const handler = route({ name: "POST /api/unexpected", access: "operator" }, async () => {
      await admin.call("AUTH", "lockscope", PASSWORD);
      return {};
    });
    const res = await call(handler, "POST", "/api/unexpected", { body: {} });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD);
    const logged = lines.find((l) => l.msg === "unhandled error in route");
    expect(logged).toMatchObject({ level: 50, route: "POST /api/unexpected", requestId: res.headers.get("x-request-id") });
    const err = logged?.err as Record<string, unknown>;
    expect(err.type).toBe("ReplyError");
    expect(err.message).toMatch(/^WRONGPASS /);
    expect(String(err.stack)).toMatch(/^ReplyError: WRONGPASS /);
    expect(JSON.stringify(lines)).not.toContain(PASSWORD);
  });

  it("a command the node does not know: logged with Redis's reply, without the arguments Redis repeats in it", async () => {
    const TOKEN = "holder-token-log-secret-4567";
    for (const client of cluster.clients()) await client.set("lock:logged", TOKEN, "PX", 60_000);
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Alogged/release", { body: { reason: "stuck holder" }, params: { resource: "lock:logged" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // The revocation notice names the released value; PUBLISH is renamed away on these nodes.
    const logged = lines.filter((l) => l.msg === "revocation notice not published");
    expect(logged).toHaveLength(3);
    expect(logged[0]?.err).toBe("ReplyError: ERR unknown command 'publish', with args beginning with: [redacted]");
    expect(JSON.stringify(lines)).not.toContain(TOKEN);
  });
});
