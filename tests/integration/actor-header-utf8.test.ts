import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import { OPERATOR_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * `X-Lockscope-Actor` as scripts send it to the real production server: curl, Python's requests and most HTTP
 * clients write a header's text as UTF-8 bytes, which Node.js reads one character per byte. A name of letters
 * outside ASCII must name its sender in the audit log as written, not as those bytes read one by one.
 */

interface Answer {
  status: number;
  body: string;
}

describe("X-Lockscope-Actor with letters outside ASCII", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;
  let node: Redis;

  beforeAll(async () => {
    cluster = await startCluster(1);
    [node] = cluster.clients() as [Redis];
    launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN });
  }, 120_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await cluster?.close();
  });

  /** One request written byte for byte; `actor` goes out as the bytes given. */
  const send = (method: string, target: string, actor: Buffer, body = "") =>
    new Promise<Answer>((resolve, reject) => {
      const head = [
        `${method} ${target} HTTP/1.1`,
        `Host: 127.0.0.1:${launcher.port}`,
        `Authorization: Bearer ${OPERATOR_TOKEN}`,
        ...(body ? ["Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`] : []),
        "Connection: close",
      ].join("\r\n");
      const socket = net.connect(launcher.port, "127.0.0.1", () =>
        socket.write(Buffer.concat([Buffer.from(`${head}\r\nX-Lockscope-Actor: `, "latin1"), actor, Buffer.from(`\r\n\r\n${body}`, "utf8")])),
      );
      let out = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => (out = Buffer.concat([out, chunk])));
      socket.on("error", reject);
      socket.on("end", () => {
        const text = out.toString("utf8");
        const bodyText = text.slice(text.indexOf("\r\n\r\n") + 4);
        // (A chunked answer: its JSON sits between the chunk sizes.)
        resolve({ status: Number(text.slice(9, 12)), body: bodyText.slice(bodyText.indexOf("{"), bodyText.lastIndexOf("}") + 1) });
      });
    });

  const auditActors = async (resource: string) => {
    const res = await fetch(`http://127.0.0.1:${launcher.port}/api/audit?resource=${encodeURIComponent(resource)}`);
    return ((await res.json()) as { entries: Array<{ actor: string; resource: string }> }).entries.filter((e) => e.resource === resource).map((e) => e.actor);
  };

  it("records a force release under the name sent in UTF-8, and GET /api/session says that name", async () => {
    for (const name of ["Jürgen Müller", "Zoë", "José", "Łukasz", "田中 太郎"]) {
      const resource = `lock:actor/${Buffer.from(name).toString("hex")}`;
      await node.set(resource, "held-by-a-worker", "PX", 60_000);
      const res = await send("POST", `/api/locks/${encodeURIComponent(resource)}/release`, Buffer.from(name, "utf8"), JSON.stringify({ reason: "worker hung" }));
      expect([name, res.status]).toEqual([name, 200]);
      expect(res.body).toContain('"released":true');
      expect(await node.exists(resource)).toBe(0);
      expect(await auditActors(resource)).toEqual([name]);
      const session = await send("GET", "/api/session", Buffer.from(name, "utf8"));
      expect(JSON.parse(session.body)).toMatchObject({ role: "operator", actor: name, via: "bearer" });
    }
  });

  it("still takes a name sent as Latin-1 bytes, and still refuses one that is no name", async () => {
    const resource = "lock:actor/latin1";
    await node.set(resource, "held-by-a-worker", "PX", 60_000);
    const latin1 = await send("POST", `/api/locks/${encodeURIComponent(resource)}/release`, Buffer.from("Zoë", "latin1"), JSON.stringify({ reason: "worker hung" }));
    expect(latin1.status).toBe(200);
    expect(await auditActors(resource)).toEqual(["Zoë"]);

    await node.set(resource, "held-by-a-worker", "PX", 60_000);
    for (const bad of ["<b>Zoë</b>", "Zoë ©"]) {
      const res = await send("POST", `/api/locks/${encodeURIComponent(resource)}/release`, Buffer.from(bad, "utf8"), JSON.stringify({ reason: "worker hung" }));
      expect([bad, res.status]).toEqual([bad, 400]);
      const { error } = JSON.parse(res.body) as { error: { code: string; message: string } };
      expect(error.code).toBe("bad_request");
      expect(error.message).toContain("X-Lockscope-Actor");
    }
    expect(await node.get(resource)).toBe("held-by-a-worker");
  });
});
