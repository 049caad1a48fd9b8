import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ping, RedisNode, serverPid } from "@/lib/redis-node";
import { startCluster, type TestCluster } from "../support/redis";

describe("test nodes", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("starts three independent nodes on free ports, none of them 6379", async () => {
    const ports = cluster.nodes.map((n) => n.port);
    expect(new Set(ports).size).toBe(3);
    expect(ports).not.toContain(6379);
    await cluster.client(0).set("lock:a", "x");
    expect(await cluster.client(1).get("lock:a")).toBeNull();
  });

  it("kills a node and restarts it empty on the same port", async () => {
    const c = cluster.client(1);
    await c.set("lock:k", "v");
    const port = cluster.nodes[1]!.port;
    await cluster.kill(1);
    expect(await ping(port)).toBe(false);
    await cluster.restart(1);
    expect(cluster.nodes[1]!.port).toBe(port);
    expect(await ping(port)).toBe(true);
    const fresh = cluster.client(1);
    expect(await fresh.get("lock:k")).toBeNull();
  });

  it("keeps a killed or stopped node's port from every other redis-server until the node starts again", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-held-"));
    // Another process's redis-server asked for the port (not through this process's nodes): it must fail to bind.
    const foreignStart = (port: number) =>
      new Promise<string>((resolve) => {
        const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir], { stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        child.stdout.on("data", (c: Buffer) => (out += c.toString()));
        child.stderr.on("data", (c: Buffer) => (out += c.toString()));
        const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
        child.once("exit", (code, signal) => {
          clearTimeout(timer);
          resolve(signal === "SIGKILL" ? `still running after 3 s: ${out.slice(-300)}` : `exited ${code}: ${out.slice(-300)}`);
        });
      });
    const node = await RedisNode.start({ dir });
    try {
      await node.kill();
      expect(await ping(node.port)).toBe(false);
      expect(await foreignStart(node.port)).toMatch(/exited 1: .*Address already in use/s);
      await node.restart();
      expect(await serverPid(node.port)).toBe(node.pid);
      await node.stop();
      expect(await foreignStart(node.port)).toMatch(/exited 1: .*Address already in use/s);
      // A node of this process asked for that port takes it.
      const again = await RedisNode.start({ dir, port: node.port });
      expect(await serverPid(node.port)).toBe(again.pid);
      await again.stop();
    } finally {
      await node.stop();
    }
  });

  it("pauses a node with SIGSTOP so it stops answering, and resumes it", async () => {
    const port = cluster.nodes[2]!.port;
    cluster.pause(2);
    expect(await ping(port, "127.0.0.1", 200)).toBe(false);
    cluster.resume(2);
    expect(await ping(port)).toBe(true);
  });

  it("does not take another redis-server that holds the port for its own: the start fails and names it, and that server is left alone", async () => {
    const other = cluster.nodes[0]!;
    const owner = await serverPid(other.port);
    expect(owner).toBe(other.pid);
    await cluster.client(0).set("lock:theirs", "kept");
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-taken-"));
    await expect(RedisNode.start({ dir, port: other.port })).rejects.toThrow(`redis-server did not start on port ${other.port}: the port is held by another redis-server (pid ${owner})`);
    expect(await serverPid(other.port)).toBe(owner);
    expect(await cluster.client(0).get("lock:theirs")).toBe("kept");
  });
});
