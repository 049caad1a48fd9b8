import { describe, expect, it } from "vitest";
import { e2eTarget } from "../e2e/target";

describe("the browser tests' target guard", () => {
  it("runs against a loopback console on the given port", () => {
    expect(e2eTarget({})).toEqual({ baseURL: "http://127.0.0.1:3210", host: "127.0.0.1", port: 3210 });
    expect(e2eTarget({ E2E_PORT: "3231" }).baseURL).toBe("http://127.0.0.1:3231");
    expect(e2eTarget({ E2E_BASE_URL: "http://localhost:4000" })).toEqual({ baseURL: "http://localhost:4000", host: "localhost", port: 4000 });
    expect(e2eTarget({ E2E_HOST: "[::1]", E2E_PORT: "4001" })).toEqual({ baseURL: "http://[::1]:4001", host: "::1", port: 4001 });
  });

  it("refuses any target that is not this machine, or not a plain http URL with a port", () => {
    for (const env of [
      { E2E_BASE_URL: "https://lockscope.example.com" },
      { E2E_BASE_URL: "http://10.0.0.5:3000" },
      { E2E_BASE_URL: "http://127.0.0.1.evil.example:3000" },
      { E2E_BASE_URL: "http://localhost@evil.example:3000" },
      { E2E_BASE_URL: "https://127.0.0.1:3000" },
      { E2E_BASE_URL: "http://127.0.0.1" },
      { E2E_BASE_URL: "http://127.0.0.1:3000/prefix" },
      { E2E_BASE_URL: "not a url" },
      { E2E_HOST: "staging.internal" },
      { E2E_PORT: "3000/../evil" },
      { E2E_PORT: "99999" },
      { E2E_PORT: "abc" },
    ]) {
      expect(() => e2eTarget(env), JSON.stringify(env)).toThrow(/non-local target/);
    }
  });
});
