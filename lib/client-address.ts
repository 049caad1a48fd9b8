import { BlockList, isIP } from "node:net";

/**
 * The client's address behind proxies the operator trusts (`TRUSTED_PROXIES`). X-Forwarded-For is read
 * from the right: each hop appended by a trusted proxy is skipped, and the first address a trusted proxy
 * did not vouch for is the client. A connection from anywhere else is the client itself, whatever header
 * it sent (a client can write any X-Forwarded-For it likes).
 */

/** `10.0.0.0/8`, `192.168.1.5`, `fd00::/8`, `::1`: what TRUSTED_PROXIES may hold. */
export function parseProxyEntry(entry: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | null {
  const [address = "", prefixText, ...rest] = entry.split("/");
  if (rest.length > 0) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) return null;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

/** The trusted proxies as a BlockList (Node's own CIDR matcher); entries must have passed `parseProxyEntry`. */
export function trustedProxyList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const parsed = parseProxyEntry(entry);
    if (!parsed) throw new TypeError(`Expected \`TRUSTED_PROXIES\` entries to be IP addresses or CIDRs, got \`${entry}\``);
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return list;
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) is 10.0.0.1. */
function normalise(address: string): string {
  const trimmed = address.trim();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(trimmed);
  return mapped?.[1] ?? trimmed;
}

/**
 * One X-Forwarded-For entry as an address. Some proxies (Azure's Application Gateway among them) write the
 * client's port too: `1.2.3.4:5678`, `[2001:db8::1]:443`; read as anything else than the address, every client
 * behind them would be the proxy. An IPv6 address without brackets has no port (`2001:db8::443` ends in a group).
 */
function hopAddress(entry: string): string {
  const trimmed = entry.trim();
  const address = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/.exec(trimmed)?.[1] ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(trimmed)?.[1] ?? trimmed;
  return normalise(address);
}

function isTrusted(list: BlockList, address: string): boolean {
  const version = isIP(address);
  return version !== 0 && list.check(address, version === 4 ? "ipv4" : "ipv6");
}

export function clientAddress(remote: string | undefined, forwardedFor: string | readonly string[] | undefined, trusted: BlockList | null): string {
  const peer = remote ? normalise(remote) : "unknown";
  if (!trusted || forwardedFor === undefined || !isTrusted(trusted, peer)) return peer;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : (forwardedFor as string)).split(",").map(hopAddress).filter((h) => h !== "");
  let nearest = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // Not an address: the proxy that passed it on is the last hop anyone vouched for.
    if (isIP(hop) === 0) return nearest;
    if (!isTrusted(trusted, hop)) return hop;
    nearest = hop;
  }
  return nearest;
}

/**
 * The key a client is limited under (its wrong tokens, its live streams). An IPv4 address is itself. An IPv6
 * address stands for its /64 network: one host on one network is given the whole /64 (SLAAC, privacy
 * addresses, an ISP's prefix per customer), so a client could otherwise take a fresh address for every try. Written the same
 * way whatever the address's spelling (`2001:DB8:0:0::1`, `2001:db8::1`). Anything else is kept as it is.
 */
export function clientLimitKey(address: string): string {
  if (isIP(address) !== 6) return address;
  const hextets = expandIpv6(address.replace(/%.*$/, ""));
  if (!hextets) return address;
  return `${hextets.slice(0, 4).map((h) => h.toString(16)).join(":")}::/64`;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a dotted IPv4 tail as two groups); null if malformed. */
function expandIpv6(address: string): number[] | null {
  const halves = address.toLowerCase().split("::");
  if (halves.length > 2) return null;
  const groups = (text: string): number[] | null => {
    if (text === "") return [];
    const out: number[] = [];
    for (const part of text.split(":")) {
      if (part.includes(".")) {
        const octets = part.split(".").map(Number);
        if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255)) return null;
        out.push((octets[0]! << 8) | octets[1]!, (octets[2]! << 8) | octets[3]!);
      } else if (/^[0-9a-f]{1,4}$/.test(part)) {
        out.push(parseInt(part, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}
