import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Lock, LockDetail, LockLoss } from "@/lib/locks/types";
import { startCluster, type TestCluster } from "./redis";

export const OPERATOR_TOKEN = "it-operator-token-0123456789abcdef";
export const VIEWER_TOKEN = "it-viewer-token-0123456789abcdef";
export const ORIGIN = "http://127.0.0.1:3999";

/**
 * Prepares an integration test file to call the console's real route handlers in-process: starts real
 * redis-server lock nodes and points the console's configuration at them. Call it in `beforeAll`
 * BEFORE importing any `server/` or `app/` module (use `await import(...)` after it), since the
 * configuration is read once per process. Each test file runs in its own process (vitest forks).
 */
export async function setUpConsole(options: { nodes?: number; env?: Record<string, string>; extraArgs?: string[] } = {}): Promise<TestCluster> {
  const cluster = await startCluster(options.nodes ?? 3, options.extraArgs ?? []);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-console-"));
  Object.assign(process.env, {
    REDIS_URLS: cluster.urls.join(","),
    LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
    LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
    LOCKSCOPE_DATA_DIR: dataDir,
    LOG_LEVEL: "silent",
    // The console's own origins are built from its port: ORIGIN's, so that requests carrying it are same-origin.
    PORT: new URL(ORIGIN).port,
    ...options.env,
  });
  return cluster;
}

type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;

interface CallOptions {
  token?: string | null;
  body?: unknown;
  rawBody?: string;
  origin?: string | null;
  headers?: Record<string, string>;
  params?: Record<string, string>;
}

/**
 * Points the console at several deployments (a `LOCKSCOPE_DEPLOYMENTS_FILE` listing them, in place of the
 * one `setUpConsole` described). Call it after `setUpConsole` and before importing any `server/` module.
 */
export function useDeployments(deployments: ReadonlyArray<Record<string, unknown>>): void {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-deployments-")), "deployments.json");
  writeFileSync(file, JSON.stringify({ deployments }));
  delete process.env.REDIS_URLS;
  process.env.LOCKSCOPE_DEPLOYMENTS_FILE = file;
}

/** Calls a route handler the way Next.js would, with a bearer token (operator by default) and our Origin. */
/** `GET /api/losses` as a viewer: the locks nodes lost while their TTL ran, newest first. */
export async function listedLosses(query = ""): Promise<LockLoss[]> {
  const route = await import("@/app/api/losses/route");
  const res = await call(route.GET, "GET", `/api/losses${query}`, { token: VIEWER_TOKEN });
  if (res.status !== 200) throw new Error(`GET /api/losses${query}: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body as { losses: LockLoss[] }).losses;
}

export async function call(handler: Handler, method: string, pathAndQuery: string, options: CallOptions = {}): Promise<{ status: number; body: unknown; headers: Headers }> {
  const headers = new Headers(options.headers);
  const token = options.token === undefined ? OPERATOR_TOKEN : options.token;
  if (token) headers.set("authorization", `Bearer ${token}`);
  if (options.origin !== null && method !== "GET") headers.set("origin", options.origin ?? ORIGIN);
  headers.set("host", new URL(ORIGIN).host);
  headers.set("x-lockscope-client-ip", headers.get("x-lockscope-client-ip") ?? "127.0.0.1");
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
  const request = new Request(`${ORIGIN}${pathAndQuery}`, { method, headers, body });
  const response = await handler(request, { params: Promise.resolve(options.params ?? {}) });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (metrics, streams): keep the text
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

/** A lock's page (`GET /api/locks/{resource}`, through its route handler) as a viewer reads it; null for any answer but 200. */
export async function lockDetail(resource: string): Promise<LockDetail | null> {
  const route = await import("@/app/api/locks/[resource]/route");
  const res = await call(route.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
  return res.status === 200 ? (res.body as LockDetail) : null;
}

/** The live locks (`GET /api/locks`, through its route handler) as a viewer reads them. */
export async function listedLocks(): Promise<Lock[]> {
  const route = await import("@/app/api/locks/route");
  return ((await call(route.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] }).locks;
}

/** Runs the console's shutdown hooks (streams, lab, audit, watchers, connections), then stops the nodes. */
export async function tearDownConsole(cluster: TestCluster | undefined): Promise<void> {
  const { getShutdownHooks } = await import("@/server/shutdown");
  for (const hook of getShutdownHooks()) await hook.run();
  await cluster?.close();
}

/**
 * Starts the console's live view (with `metrics`, what reports it on /metrics first) and waits until every node's
 * watcher has read its node, or given up on it for now. A start-up on a busy machine takes seconds: up to 30 s.
 */
export async function startLiveReconciled(options: { metrics?: boolean } = {}): Promise<void> {
  if (options.metrics) (await import("@/server/console-metrics")).startConsoleMetrics();
  const { waitUntilReconciled } = await import("@/server/live");
  if (!(await waitUntilReconciled(30_000))) throw new Error("the console's watchers had not read their nodes after 30 s");
}
