/**
 * Where the browser tests run. They sign in, release locks and run lab faults, so they must only ever
 * reach a console on this machine: the target comes from the environment (`E2E_BASE_URL`, or
 * `E2E_HOST` and `E2E_PORT`), and anything that is not a loopback http URL with a port is refused.
 */

export interface E2ETarget {
  baseURL: string;
  host: string;
  port: number;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

export function e2eTarget(env: Readonly<Record<string, string | undefined>>): E2ETarget {
  const raw = env.E2E_BASE_URL ?? `http://${env.E2E_HOST ?? "127.0.0.1"}:${env.E2E_PORT ?? "3210"}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`Refusing to run e2e tests against a non-local target: ${raw} is not a URL`);
  }
  const port = Number(url.port);
  const plain = url.pathname === "/" && url.search === "" && url.hash === "" && url.username === "" && url.password === "";
  if (url.protocol !== "http:" || !LOOPBACK.has(url.hostname) || !Number.isInteger(port) || port < 1 || port > 65535 || !plain) {
    throw new Error(`Refusing to run e2e tests against a non-local target: ${raw}`);
  }
  return { baseURL: url.origin, host: url.hostname.replace(/^\[|\]$/g, ""), port };
}
