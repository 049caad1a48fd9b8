import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as StreamModule from "@/app/api/locks/stream/route";
import { call, OPERATOR_TOKEN, ORIGIN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";

type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;

describe("live stream limits", () => {
  let cluster: TestCluster;
  let stream: typeof StreamModule;
  let clients: () => number;
  const open: StreamReader[] = [];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_MAX_STREAMS_PER_ADDRESS: "3", LOCKSCOPE_MAX_STREAMS_PER_TOKEN: "5" } });
    stream = await import("@/app/api/locks/stream/route");
    const live = await import("@/server/live");
    clients = () => live.getStreamHub().clientCount;
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    for (const s of open) s.close();
    await tearDownConsole(cluster);
  });

  /** One stream request; a stream that opens is cancelled at once (only the answer matters here). */
  const attempt = async (token: string, clientIp: string) => {
    const headers = { authorization: `Bearer ${token}`, host: new URL(ORIGIN).host, "x-lockscope-client-ip": clientIp };
    const res = await stream.GET(new Request(`${ORIGIN}/api/locks/stream`, { headers }), { params: Promise.resolve({}) });
    if (res.status === 200) {
      await res.body?.cancel();
      return { status: 200, headers: res.headers, body: null };
    }
    return { status: res.status, headers: res.headers, body: (await res.json()) as { error: { code: string; message: string } } };
  };

  const tab = async (options: Parameters<typeof openStream>[1]) => {
    const s = await openStream(stream.GET, options);
    open.push(s);
    await s.until("snapshot", () => s.events.some((e) => e.event === "snapshot"));
    return s;
  };

  it("answers HEAD with the stream's headers and opens no stream", async () => {
    // Next.js runs GET for HEAD where a route exports no HEAD.
    const exported: { GET: Handler; HEAD?: Handler } = stream;
    const head = exported.HEAD ?? exported.GET;
    const before = clients();
    const answers: Response[] = [];
    for (let i = 0; i < 50; i++) {
      const headers = { authorization: `Bearer ${VIEWER_TOKEN}`, host: new URL(ORIGIN).host, "x-lockscope-client-ip": "10.9.0.1" };
      const res = await head(new Request(`${ORIGIN}/api/locks/stream`, { method: "HEAD", headers }), { params: Promise.resolve({}) });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      answers.push(res);
    }
    // Nobody reads or cancels a HEAD's body: nothing may be left open for it.
    expect(clients()).toBe(before);
    await Promise.all(answers.map((res) => res.body?.cancel() ?? Promise.resolve()));
    expect((await call(head, "HEAD", "/api/locks/stream", { token: null })).status).toBe(401);
    // As GET would answer: a deployment the console does not watch is a 400 there too, not a 200 for a stream GET refuses.
    const unknown = await call(head, "HEAD", "/api/locks/stream?deployment=billing", { token: VIEWER_TOKEN });
    const refused = await call(stream.GET, "GET", "/api/locks/stream?deployment=billing", { token: VIEWER_TOKEN });
    expect(refused.status).toBe(400);
    expect(unknown.status).toBe(400);
    expect(clients()).toBe(before);
  });

  it("counts an IPv6 client's streams by its /64 network, so a new address per stream gains it nothing", async () => {
    const tabs = [];
    for (let i = 1; i <= 3; i++) tabs.push(await tab({ clientIp: `2001:db8:5:1::${i}` }));
    const refused = await attempt(VIEWER_TOKEN, "2001:db8:5:1:ffff::4");
    expect(refused.status).toBe(429);
    expect(refused.body?.error.message).toContain("from this address (at most 3");
    // Another network is not affected.
    const other = await tab({ clientIp: "2001:db8:5:2::1" });
    for (const t of [...tabs, other]) t.close();
    await until("the streams closed", () => clients() === 0, 10_000);
  });

  it("refuses a stream past the limit per address with a 429 that says why, and takes one again once a tab closes", async () => {
    const tabs = [];
    for (let i = 0; i < 3; i++) tabs.push(await tab({ clientIp: "10.1.0.1" }));
    const refused = await attempt(VIEWER_TOKEN, "10.1.0.1");
    expect(refused.status).toBe(429);
    expect(refused.body?.error.code).toBe("rate_limited");
    expect(refused.body?.error.message).toContain("from this address (at most 3");
    expect(refused.headers.get("retry-after")).toBeTruthy();
    // Another address is not affected.
    await tab({ clientIp: "10.1.0.2" });
    tabs[0]!.close();
    const reopened = await until("a tab from that address accepted again", async () => {
      try {
        return await openStream(stream.GET, { clientIp: "10.1.0.1" });
      } catch {
        return null;
      }
    });
    open.push(reopened);
  });

  it("refuses a stream past the limit per token, whatever the address", async () => {
    for (let i = 0; i < 5; i++) await tab({ token: OPERATOR_TOKEN, clientIp: `10.2.0.${i}` });
    const refused = await attempt(OPERATOR_TOKEN, "10.2.0.9");
    expect(refused.status).toBe(429);
    expect(refused.body?.error.message).toContain("with this token (at most 5");
  });
});
