import { describe, expect, it } from "vitest";
import { clientAddress, clientLimitKey, parseProxyEntry, trustedProxyList } from "@/lib/client-address";
import { ConfigError, parseConfig } from "@/lib/config";

describe("the client address behind trusted proxies", () => {
  const trusted = trustedProxyList(["10.0.0.0/8", "192.168.1.5", "fd00::/8"]);

  it("is the peer when no proxy is trusted, whatever X-Forwarded-For says", () => {
    expect(clientAddress("203.0.113.7", "198.51.100.1", null)).toBe("203.0.113.7");
    expect(clientAddress("::ffff:203.0.113.7", undefined, null)).toBe("203.0.113.7");
    expect(clientAddress(undefined, undefined, null)).toBe("unknown");
  });

  it("is the peer when the peer is not a trusted proxy (a client can write any header)", () => {
    expect(clientAddress("203.0.113.7", "10.1.1.1", trusted)).toBe("203.0.113.7");
  });

  it("is the first hop from the right that no trusted proxy vouched for", () => {
    expect(clientAddress("10.0.0.2", "198.51.100.9", trusted)).toBe("198.51.100.9");
    // The client forged a first entry; the proxies appended the real one after it.
    expect(clientAddress("10.0.0.2", "1.2.3.4, 198.51.100.9, 192.168.1.5", trusted)).toBe("198.51.100.9");
    expect(clientAddress("::ffff:10.0.0.2", ["1.2.3.4", "198.51.100.9"], trusted)).toBe("198.51.100.9");
    expect(clientAddress("fd00::1", "2001:db8::5", trusted)).toBe("2001:db8::5");
    // Only trusted hops: the farthest of them.
    expect(clientAddress("10.0.0.2", "10.0.0.3, 10.0.0.4", trusted)).toBe("10.0.0.3");
    // Garbage in the header: the nearest proxy that passed it on.
    expect(clientAddress("10.0.0.2", "not-an-ip, 10.0.0.4", trusted)).toBe("10.0.0.4");
  });

  it("reads an X-Forwarded-For entry that carries a port as its address (some proxies, Azure's gateway, append one)", () => {
    expect(clientAddress("10.0.0.2", "198.51.100.9:5678", trusted)).toBe("198.51.100.9");
    expect(clientAddress("10.0.0.2", "[2001:db8::1]:443", trusted)).toBe("2001:db8::1");
    expect(clientAddress("10.0.0.2", "[2001:db8::1]", trusted)).toBe("2001:db8::1");
    expect(clientAddress("10.0.0.2", "[::ffff:198.51.100.9]:80", trusted)).toBe("198.51.100.9");
    // A trusted proxy's own entry with a port is still that proxy: skipped.
    expect(clientAddress("10.0.0.2", "1.2.3.4:1, 198.51.100.9:5678, 192.168.1.5:8080", trusted)).toBe("198.51.100.9");
    // Two clients behind the proxy are two addresses, counted apart.
    const one = clientAddress("10.0.0.2", "198.51.100.9:5678", trusted);
    const other = clientAddress("10.0.0.2", "198.51.100.10:41234", trusted);
    expect(clientLimitKey(one)).not.toBe(clientLimitKey(other));
    // An IPv6 address without brackets has no port: its last group is part of it.
    expect(clientAddress("10.0.0.2", "2001:db8::443", trusted)).toBe("2001:db8::443");
    // From a peer no one trusts, the header is not read, port or not.
    expect(clientAddress("203.0.113.7", "198.51.100.9:5678", trusted)).toBe("203.0.113.7");
  });

  it("parses TRUSTED_PROXIES and names a wrong entry", () => {
    expect(parseProxyEntry("10.0.0.0/8")).toEqual({ address: "10.0.0.0", prefix: 8, family: "ipv4" });
    expect(parseProxyEntry("::1")).toEqual({ address: "::1", prefix: 128, family: "ipv6" });
    for (const bad of ["10.0.0.0/33", "proxy.local", "10.0.0.0/8/1", "10.0.0.0/x", ""]) expect(parseProxyEntry(bad), bad).toBeNull();
    expect(parseConfig({ TRUSTED_PROXIES: "10.0.0.0/8, 192.168.1.5" }).trustedProxies).toEqual(["10.0.0.0/8", "192.168.1.5"]);
    expect(parseConfig({}).trustedProxies).toEqual([]);
    expect(() => parseConfig({ TRUSTED_PROXIES: "10.0.0.0/8,lb.internal" })).toThrow(ConfigError);
    expect(() => parseConfig({ TRUSTED_PROXIES: "10.0.0.0/8,lb.internal" })).toThrow(/TRUSTED_PROXIES=.*expected comma-separated IP addresses or CIDRs/);
  });

  it("limits clients by IPv4 address, and by /64 network for IPv6 whatever its spelling", () => {
    expect(clientLimitKey("203.0.113.7")).toBe("203.0.113.7");
    expect(clientLimitKey("unknown")).toBe("unknown");
    for (const spelling of ["2001:db8:7:1::1", "2001:DB8:7:1:0:0:0:1", "2001:0db8:0007:0001:ffff::", "2001:db8:7:1:1:2:192.0.2.1", "2001:db8:7:1::1%eth0"]) {
      expect(clientLimitKey(spelling), spelling).toBe("2001:db8:7:1::/64");
    }
    expect(clientLimitKey("::1")).toBe("0:0:0:0::/64");
    expect(clientLimitKey("fe80::1")).toBe("fe80:0:0:0::/64");
    expect(clientLimitKey("2001:db8:7:2::1")).not.toBe(clientLimitKey("2001:db8:7:1::1"));
  });
});
