import { defineConfig } from "@playwright/test";
import { e2eTarget } from "./tests/e2e/target";

// E2E runs only against a console this config starts on loopback, with its own embedded lock nodes: the
// target is read from the environment and refused (the run stops here) unless it is local.
const { baseURL, host: HOST, port: PORT } = e2eTarget(process.env);

export const E2E_OPERATOR_TOKEN = "e2e-operator-token-0123456789abcdef";
export const E2E_VIEWER_TOKEN = "e2e-viewer-token-0123456789abcdef";

export default defineConfig({
  testDir: "tests/e2e",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  forbidOnly: true,
  // `npm run screenshots` (LOCKSCOPE_SCREENSHOTS=1) runs only the @screenshots spec, which rewrites docs/*.png; `npm test` never does.
  ...(process.env.LOCKSCOPE_SCREENSHOTS ? { grep: /@screenshots/ } : { grepInvert: /@screenshots/ }),
  timeout: 60_000,
  expect: { timeout: 15_000 },
  reporter: [["list"]],
  outputDir: "test-results",
  use: {
    baseURL,
    browserName: "chromium",
    trace: "off",
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
  },
  webServer: {
    command: "node --v8-pool-size=2 scripts/quickstart.mjs",
    url: `${baseURL}/api/health`,
    timeout: 240_000,
    reuseExistingServer: false,
    stdout: "ignore",
    stderr: "pipe",
    gracefulShutdown: { signal: "SIGTERM", timeout: 10_000 },
    env: {
      PORT: String(PORT),
      HOST,
      LOCKSCOPE_DATA_DIR: `.lockscope/e2e-${PORT}`,
      LOCKSCOPE_OPERATOR_TOKEN: E2E_OPERATOR_TOKEN,
      LOCKSCOPE_VIEWER_TOKEN: E2E_VIEWER_TOKEN,
      LOG_LEVEL: "warn",
      // Stopped by SIGTERM with 10 s to go, and no load balancer in front: no shutdown delay.
      LOCKSCOPE_SHUTDOWN_DELAY_MS: "0",
    },
  },
});
