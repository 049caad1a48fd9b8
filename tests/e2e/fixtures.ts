import { test as base, expect, type APIRequestContext } from "@playwright/test";
import Redis from "ioredis";
import { E2E_OPERATOR_TOKEN, E2E_VIEWER_TOKEN } from "../../playwright.config";

export { expect };
export { E2E_OPERATOR_TOKEN, E2E_VIEWER_TOKEN };

interface HealthBody {
  nodes: Array<{ id: string; url: string; up: boolean }>;
}

/** The console's own lock nodes (embedded, started by the e2e web server), as clients the test can write with. */
export async function lockNodeClients(request: APIRequestContext): Promise<Redis[]> {
  const response = await request.get("/api/health");
  const body = (await response.json()) as HealthBody;
  return body.nodes.map((node) => {
    const url = new URL(node.url);
    if (url.hostname !== "127.0.0.1" || url.port === "6379") throw new Error(`refusing non-local or foreign node ${node.url}`);
    const client = new Redis(Number(url.port), "127.0.0.1", { maxRetriesPerRequest: 1 });
    // A node a lab fault restarts refuses connections for a moment; ioredis reconnects, and a command that
    // fails meanwhile rejects where the test awaits it. Without a listener each refusal is logged as unhandled.
    client.on("error", () => undefined);
    return client;
  });
}

type Fixtures = { signIn: (role: "operator" | "viewer") => Promise<void> };

export const test = base.extend<Fixtures>({
  signIn: async ({ page, baseURL }, use) => {
    await use(async (role) => {
      const token = role === "operator" ? E2E_OPERATOR_TOKEN : E2E_VIEWER_TOKEN;
      const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
      const response = await page.request.post("/api/session", { data: { token, name: `e2e-${role}` }, headers: { Origin: origin } });
      expect(response.status(), await response.text()).toBe(200);
    });
  },
});
