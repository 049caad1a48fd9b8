/**
 * Which host names the console answers to, and which origins may change something. DNS rebinding points
 * a name the attacker controls (`attacker.example`) at the console's address, so the browser treats the
 * console as the attacker's own origin: the Host header then names the attacker's domain. The console
 * serves only names it was told about, and accepts an `Origin` only from that same list, never one
 * derived from the request's own Host. Pure: the proxy and the route wrapper feed it the configuration.
 */

export interface HostRulesInput {
  /** The bind address (`HOST`). A wildcard (`0.0.0.0`, `::`) stands for every address in `interfaceAddresses`. */
  bindHost: string;
  /** The port the console listens on: local origins are `http://<name>:<port>`. */
  port: number;
  publicOrigin: string | null;
  allowedHosts: readonly string[];
  /** This machine's own addresses, used when the bind address is a wildcard. */
  interfaceAddresses?: readonly string[];
}

export interface HostRules {
  /** Lower-case host names, IPv6 in brackets, without ports. */
  names: ReadonlySet<string>;
  origins: ReadonlySet<string>;
}

const LOCAL_NAMES = ["localhost", "127.0.0.1", "[::1]"];
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);

/** `::1` → `[::1]`: the form a Host header and a URL use. */
function hostForm(address: string): string {
  const lower = address.trim().toLowerCase();
  return lower.includes(":") && !lower.startsWith("[") ? `[${lower}]` : lower;
}

export function hostRules(input: HostRulesInput): HostRules {
  const names = new Set<string>(LOCAL_NAMES);
  if (WILDCARDS.has(input.bindHost)) {
    for (const address of input.interfaceAddresses ?? []) names.add(hostForm(address.replace(/%.*$/, "")));
  } else {
    names.add(hostForm(input.bindHost));
  }
  for (const name of input.allowedHosts) names.add(hostForm(name));
  const origins = new Set<string>();
  for (const name of names) {
    try {
      origins.add(new URL(`http://${name}:${input.port}`).origin);
    } catch {
      // not a usable host name: it can still be matched as a Host, never as an origin
    }
  }
  if (input.publicOrigin) {
    const publicUrl = new URL(input.publicOrigin);
    names.add(publicUrl.hostname.toLowerCase());
    origins.add(publicUrl.origin);
  }
  return { names, origins };
}

// A host name or address with an optional port, and nothing else: `evil@localhost` or `localhost/x`
// would parse as `localhost` in a URL.
const HOST_HEADER = /^(?<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])(?::(?<port>\d{1,5}))?$/;

/** The host name a Host header names (lower case, no port), or null when it is not a plain host[:port]. */
export function hostNameOf(hostHeader: string | null): string | null {
  if (!hostHeader) return null;
  const match = HOST_HEADER.exec(hostHeader.trim());
  // A fully qualified name may end with the root's dot (`localhost.`, `lockscope.example.com.`): the same host.
  return match?.groups?.name ? match.groups.name.toLowerCase().replace(/(?<=[^.])\.$/, "") : null;
}

/** The host names and origins a console with this configuration answers to (`interfaceAddresses`: this machine's). */
export function consoleHostRules(
  config: { host: string; port: number; publicOrigin: string | null; allowedHosts: readonly string[] },
  interfaceAddresses: readonly string[],
): HostRules {
  return hostRules({ bindHost: config.host, port: config.port, publicOrigin: config.publicOrigin, allowedHosts: config.allowedHosts, interfaceAddresses });
}

/** What a request addressed to another host name is told (421). */
export function misdirectedMessage(hostHeader: string | null): string {
  return `This console does not answer to the host name ${JSON.stringify((hostHeader ?? "").slice(0, 100))}. Use localhost or a configured name, or add it to ALLOWED_HOSTS (or set LOCKSCOPE_PUBLIC_ORIGIN).`;
}

/** Whether a request addressed with this Host header is for this console. The port is not compared (proxies, port mappings). */
export function isAllowedHost(rules: HostRules, hostHeader: string | null): boolean {
  const name = hostNameOf(hostHeader);
  return name !== null && rules.names.has(name);
}

/** Whether a browser's `Origin` is one of the console's own origins. */
export function isAllowedOrigin(rules: HostRules, origin: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return false;
  }
  // `Origin` is serialized exactly; anything with a path or credentials is not a browser's origin.
  return parsed.origin === origin && rules.origins.has(origin);
}
