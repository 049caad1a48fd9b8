import { describe, expect, it } from "vitest";
import { listenFailure } from "@/lib/listen-error";

/** What Node.js's `listen` fails with, as the launcher's server receives it. */
const listenError = (code: string, host: string, port: number) => Object.assign(new Error(`listen ${code}: ${host}:${port}`), { code, syscall: "listen" });

describe("the line the launcher stops with when it cannot listen", () => {
  it("names PORT when a port below 1024 is refused to a user that is not root", () => {
    const line = listenFailure(Object.assign(new Error("listen EACCES: permission denied 0.0.0.0:80"), { code: "EACCES", syscall: "listen" }), "0.0.0.0", 80);
    expect(line).toMatch(/^PORT="80" is invalid: expected /);
    // What to do about it: which ports need privileges, and what to use instead.
    expect(line).toContain("below 1024");
    expect(line).toContain("CAP_NET_BIND_SERVICE");
    // The system's own words stay, for whoever searches for them.
    expect(line).toContain("EACCES");
  });

  it("names PORT for a refused port of 1024 or more without blaming privileged ports", () => {
    const line = listenFailure(Object.assign(new Error("listen EACCES: permission denied 127.0.0.1:8080"), { code: "EACCES", syscall: "listen" }), "127.0.0.1", 8080);
    expect(line).toMatch(/^PORT="8080" is invalid: expected a port this user may listen on/);
    expect(line).not.toContain("below 1024");
  });

  it("names PORT for a port in use and HOST for an address that is not this machine's", () => {
    expect(listenFailure(listenError("EADDRINUSE", "127.0.0.1", 3000), "127.0.0.1", 3000)).toBe("port 3000 on 127.0.0.1 is in use: set PORT to a free port.");
    expect(listenFailure(listenError("EADDRNOTAVAIL", "10.9.9.9", 3000), "10.9.9.9", 3000)).toBe("HOST=10.9.9.9 is not an address of this machine: set HOST, e.g. 127.0.0.1.");
    expect(listenFailure(Object.assign(new Error("getaddrinfo ENOTFOUND nope.invalid"), { code: "ENOTFOUND" }), "nope.invalid", 3000)).toMatch(/^HOST="nope.invalid" is invalid: /);
  });
});
