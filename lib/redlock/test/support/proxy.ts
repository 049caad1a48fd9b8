import net from "node:net";

/**
 * A TCP proxy in front of one redis-server, for network faults a process signal cannot make:
 * - `partition()`: every byte in either direction is dropped, on the open connections and on new ones
 *   (they are accepted and stay silent), as when the network between client and node is cut: commands
 *   neither fail nor answer, so the client's own timeout must decide.
 * - `heal()`: the connections that lived through the partition are cut (their requests were lost, as a
 *   TCP connection gives up after a long partition), and new ones pass again.
 * - `delay(ms)`: every reply reaches the client `ms` late (a slow node, or a slow link), order kept.
 * - `refuse()`: new connections are closed at once and open ones cut (the node's port is closed).
 * - `loseReply(text)`: the next reply that contains `text` never reaches its client, whose connection is cut
 *   instead: the node carried the command out, and the client lost the answer with the connection.
 * When the node itself goes away (killed or restarted), the client's connection is cut too.
 */
export interface TcpProxy {
  port: number;
  partition(): void;
  heal(): void;
  delay(ms: number): void;
  refuse(): void;
  loseReply(text: string): void;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number, host = "127.0.0.1"): Promise<TcpProxy> {
  let mode: "pass" | "partition" | "refuse" = "pass";
  let delayMs = 0;
  let losing: Buffer | null = null;
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket; partitioned: boolean }>();

  const server = net.createServer((client) => {
    if (mode === "refuse") {
      client.destroy();
      return;
    }
    const upstream = net.connect({ port: targetPort, host });
    const pair = { client, upstream, partitioned: mode === "partition" };
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", cut);
    upstream.on("error", cut);
    client.on("close", cut);
    upstream.on("close", cut);
    client.on("data", (chunk) => {
      if (mode === "partition" || pair.partitioned) return;
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (mode === "partition" || pair.partitioned) return;
      if (losing !== null && chunk.includes(losing)) {
        losing = null;
        cut();
        return;
      }
      if (delayMs === 0) client.write(chunk);
      else setTimeout(() => client.writable && client.write(chunk), delayMs);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const address = server.address();
  if (!address || typeof address !== "object") throw new Error("the proxy has no port");

  const cutAll = (which: (pair: { partitioned: boolean }) => boolean) => {
    for (const pair of [...pairs]) {
      if (!which(pair)) continue;
      pairs.delete(pair);
      pair.client.destroy();
      pair.upstream.destroy();
    }
  };

  return {
    port: address.port,
    partition: () => {
      mode = "partition";
      for (const pair of pairs) pair.partitioned = true;
    },
    heal: () => {
      mode = "pass";
      cutAll((pair) => pair.partitioned);
    },
    delay: (ms) => {
      delayMs = ms;
    },
    loseReply: (text) => {
      losing = Buffer.from(text);
    },
    refuse: () => {
      mode = "refuse";
      cutAll(() => true);
    },
    close: async () => {
      cutAll(() => true);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
