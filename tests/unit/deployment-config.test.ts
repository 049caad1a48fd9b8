import { describe, expect, it } from "vitest";
import { parseConfig } from "@/lib/config";
import { DeploymentConfigError, parseDeployments, type ReadFile } from "@/lib/deployment-config";

const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const files: Record<string, string> = { "/ca.pem": PEM, "/client.pem": PEM, "/client.key": PEM.replace(/CERTIFICATE/g, "PRIVATE KEY"), "/pw": "s3cret-password\n", "/empty": "  \n", "/notpem": "hello" };
const readFile: ReadFile = (p) => {
  const text = files[p];
  if (text === undefined) throw Object.assign(new Error(`ENOENT: ${p}`), { code: "ENOENT" });
  return text;
};

function linesOf(env: Record<string, string>, read: ReadFile = readFile): string[] {
  try {
    parseDeployments(env, read);
  } catch (error) {
    if (error instanceof DeploymentConfigError) return [...error.lines];
    throw error;
  }
  throw new Error("expected a DeploymentConfigError");
}

describe("deployment configuration", () => {
  it("is null without any deployment variable (embedded nodes), and REDIS_URLS stays a Redlock set", () => {
    expect(parseDeployments({}, readFile)).toBeNull();
    const config = parseConfig({ REDIS_URLS: "redis://10.0.0.1:6380,redis://10.0.0.2:6380" });
    expect(config.redisUrls).toEqual(["redis://10.0.0.1:6380", "redis://10.0.0.2:6380"]);
    expect(config.deployments).toEqual([
      { name: "default", kind: "redlock", urls: ["redis://10.0.0.1:6380", "redis://10.0.0.2:6380"], tls: null, auth: { username: null, passwordFile: null } },
    ]);
  });

  it("reads a standalone instance, a Sentinel primary and TLS with a client certificate and SNI", () => {
    expect(parseDeployments({ REDIS_URL: "redis://10.0.0.9:6379/2" }, readFile)).toEqual([
      { name: "default", kind: "standalone", url: "redis://10.0.0.9:6379/2", tls: null, auth: { username: null, passwordFile: null } },
    ]);
    const [sentinel] = parseDeployments(
      { REDIS_SENTINELS: "10.0.0.1:26379, sentinel-b:26380,[::1]:26381", REDIS_SENTINEL_MASTER: "locks", REDIS_USERNAME: "lockscope", REDIS_PASSWORD_FILE: "/pw", REDIS_SENTINEL_PASSWORD_FILE: "/pw" },
      readFile,
    ) ?? [];
    expect(sentinel).toMatchObject({
      kind: "sentinel",
      master: "locks",
      sentinels: [{ host: "10.0.0.1", port: 26379 }, { host: "sentinel-b", port: 26380 }, { host: "::1", port: 26381 }],
      auth: { username: "lockscope", passwordFile: "/pw" },
      sentinelAuth: { username: null, passwordFile: "/pw" },
    });
    const [tls] = parseDeployments(
      { REDIS_URLS: "rediss://a:6380,rediss://b:6380", REDIS_TLS_CA_FILE: "/ca.pem", REDIS_TLS_CERT_FILE: "/client.pem", REDIS_TLS_KEY_FILE: "/client.key", REDIS_TLS_SERVERNAME: "redis.internal" },
      readFile,
    ) ?? [];
    expect(tls?.tls).toEqual({ caFile: "/ca.pem", certFile: "/client.pem", keyFile: "/client.key", servername: "redis.internal" });
  });

  it("says every mistake, one line each, naming the variable and never the password", () => {
    const lines = linesOf({
      REDIS_SENTINELS: "10.0.0.1:26379,nonsense,host:99999",
      REDIS_TLS_CA_FILE: "/missing.pem",
      REDIS_TLS_CERT_FILE: "/notpem",
      REDIS_PASSWORD_FILE: "/empty",
    });
    expect(lines).toEqual([
      'REDIS_TLS_CA_FILE="/missing.pem" cannot be read (ENOENT): expected a readable file.',
      'REDIS_TLS_CERT_FILE="/notpem" holds no PEM block: expected a PEM file (-----BEGIN …-----).',
      "REDIS_TLS_KEY_FILE is missing: a client certificate needs both its certificate and its key file.",
      'REDIS_PASSWORD_FILE="/empty" is empty: expected a file holding the password.',
      'REDIS_SENTINELS: entry 2 ("nonsense") is not host:port: expected host:port, e.g. 10.0.0.1:26379.',
      'REDIS_SENTINELS: entry 3 ("host:99999") has a port outside 1 to 65535: expected host:port, e.g. 10.0.0.1:26379.',
      "REDIS_SENTINEL_MASTER is missing: REDIS_SENTINELS needs the name of the master the sentinels monitor, e.g. mymaster.",
    ]);
    for (const line of lines) expect(line).not.toContain("\n");
    const url = linesOf({ REDIS_URL: "rediss://user:hunter2-password@host:6380/abc" });
    expect(url).toEqual(['REDIS_URL: URL 1 ("rediss://user:****@host:6380/abc") has a path other than a database number (/0, /1, …): expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.']);
    expect(url.join("")).not.toContain("hunter2");
  });

  it("says a sentinel given as a URL is not host:port, without the password the URL carries", () => {
    const env = linesOf({ REDIS_SENTINELS: "redis://:sentinel-pass-0123@10.0.0.1:26379,10.0.0.2:26379", REDIS_SENTINEL_MASTER: "locks" });
    expect(env).toEqual(['REDIS_SENTINELS: entry 1 ("redis://:****@10.0.0.1:26379") is not host:port: expected host:port, e.g. 10.0.0.1:26379.']);
    const file = JSON.stringify({ deployments: [{ name: "s", kind: "sentinel", sentinels: ["rediss://watcher:sentinel-pass-0123@10.0.0.1:26379"], master: "locks" }] });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? file : readFile(p)))).toEqual([
      'LOCKSCOPE_DEPLOYMENTS_FILE="/d.json": deployments[0].sentinels[0] ("rediss://watcher:****@10.0.0.1:26379") is not host:port: expected host:port.',
    ]);
  });

  it("never shows a password that holds a comma, though the list is cut there", () => {
    const secret = "redis://:pa55,word-0123@10.0.0.1:6379";
    const envs: Array<Record<string, string>> = [
      { REDIS_URLS: `${secret},redis://10.0.0.2:6379` },
      { REDIS_CLUSTER_URLS: `${secret},redis://10.0.0.2:6379` },
      { REDIS_SENTINELS: "redis://:pa55,word-0123@10.0.0.1:26379", REDIS_SENTINEL_MASTER: "locks" },
    ];
    for (const env of envs) {
      const text = linesOf(env).join("\n");
      expect(text).toContain("is not");
      expect(text).not.toContain("pa55");
      expect(text).not.toContain("word-0123");
    }
    expect(linesOf({ REDIS_URLS: `${secret},redis://10.0.0.2:6379` })[0]).toBe(
      'REDIS_URLS: URL 1 ("redis://:****") is not a URL: expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.',
    );
    // The console's own check of REDIS_URLS, which comes first at start.
    let message = "";
    try {
      parseConfig({ REDIS_URLS: `${secret},redis://10.0.0.2:6379` });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("REDIS_URLS=");
    expect(message).not.toContain("pa55");
    expect(message).not.toContain("word-0123");
  });

  it("hides a redis:// URL's user part without a colon, the password alone as Lettuce and Jedis write it", () => {
    expect(linesOf({ REDIS_URL: "redis://alone-pass-8901@host:6380/abc" })).toEqual([
      'REDIS_URL: URL 1 ("redis://****@host:6380/abc") has a path other than a database number (/0, /1, …): expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.',
    ]);
    let message = "";
    try {
      parseConfig({ REDIS_URLS: "redis://alone-pass-8901@host:6380/abc" });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('REDIS_URLS="redis://****@host:6380/abc"');
    expect(message).not.toContain("alone-pass");
    // A postgres:// URL's user name is one (its password comes from PGPASSWORD or .pgpass): shown as it is.
    expect(() => parseConfig({ AUDIT_DATABASE_URL: "postgres://lockscope@db/" })).toThrow('AUDIT_DATABASE_URL="postgres://lockscope@db/" is invalid');
  });

  it("says that REDIS_URL takes one instance when it is given a list of nodes", () => {
    expect(linesOf({ REDIS_URL: "redis://10.0.0.1:6379,redis://:s3cret@10.0.0.2:6379" })).toEqual([
      "REDIS_URL holds 2 URLs: it takes one standalone instance; put the independent nodes of a Redlock set in REDIS_URLS, or several deployments in LOCKSCOPE_DEPLOYMENTS_FILE.",
    ]);
    // A comma inside one URL's password is still one URL.
    expect(parseDeployments({ REDIS_URL: "redis://:a,b@10.0.0.9:6379" }, readFile)?.[0]).toMatchObject({ kind: "standalone", url: "redis://:a,b@10.0.0.9:6379" });
  });

  it("refuses TLS settings no URL uses and two deployments in the variables; reads a Redis Cluster's seeds", () => {
    expect(linesOf({ REDIS_URLS: "redis://a:1", REDIS_TLS_CA_FILE: "/ca.pem" })).toEqual(["REDIS_TLS_* is set but no URL of the deployment is rediss://: use rediss:// URLs for TLS."]);
    expect(linesOf({ REDIS_URLS: "redis://a:1", REDIS_URL: "redis://b:1" })).toEqual([
      "REDIS_URLS, REDIS_URL are all set: the variables describe one deployment; describe several in LOCKSCOPE_DEPLOYMENTS_FILE.",
    ]);
    expect(linesOf({ REDIS_TLS_CA_FILE: "/ca.pem", REDIS_USERNAME: "lockscope" })).toEqual([
      "REDIS_TLS_CA_FILE, REDIS_USERNAME are set without a deployment: set REDIS_URLS, REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_URLS too.",
    ]);
    expect(linesOf({ REDIS_URLS: "redis://a:1", REDIS_SENTINEL_USERNAME: "watcher" })).toEqual([
      "REDIS_SENTINEL_USERNAME is set, but the deployment has no sentinels: unset it, or describe a Sentinel deployment with REDIS_SENTINELS and REDIS_SENTINEL_MASTER.",
    ]);
    expect(parseDeployments({ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "locks", REDIS_SENTINEL_USERNAME: "watcher" })?.[0]).toMatchObject({ kind: "sentinel", sentinelAuth: { username: "watcher" } });
    expect(parseDeployments({ REDIS_CLUSTER_URLS: "redis://a:7000, redis://b:7001" })).toEqual([
      { name: "default", kind: "cluster", seeds: ["redis://a:7000", "redis://b:7001"], tls: null, auth: { username: null, passwordFile: null } },
    ]);
    expect(linesOf({ REDIS_CLUSTER_URLS: "redis://a:7000,http://b" })).toEqual([
      'REDIS_CLUSTER_URLS: URL 2 ("http://b") is not a redis:// or rediss:// URL: expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.',
    ]);
  });

  it("refuses a Redlock set that lists one node twice, which would count it twice towards the quorum", () => {
    expect(linesOf({ REDIS_URLS: "redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.1" })).toEqual([
      "REDIS_URLS: URLs 1 and 3 name the same server (10.0.0.1:6379): a Redlock set's nodes must be independent servers, or one counts twice towards the quorum.",
    ]);
    expect(linesOf({ REDIS_URLS: "redis://:secret@Node-A:6380/0,redis://node-b:6380,redis://node-a:6380/" })).toEqual([
      "REDIS_URLS: URLs 1 and 3 name the same server (node-a:6380): a Redlock set's nodes must be independent servers, or one counts twice towards the quorum.",
    ]);
    files["/twice.json"] = JSON.stringify({ deployments: [{ name: "orders", kind: "redlock", urls: ["redis://a:6379", "redis://b:6379", "redis://b:6379"] }] });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/twice.json" })).toEqual([
      'deployment "orders": urls: URLs 2 and 3 name the same server (b:6379): a Redlock set\'s nodes must be independent servers, or one counts twice towards the quorum.',
    ]);
    // Several deployments may share a node; a standalone instance and a cluster's seeds are no quorum.
    files["/shared.json"] = JSON.stringify({ deployments: [{ name: "a", kind: "redlock", urls: ["redis://a:6379", "redis://b:6379", "redis://c:6379"] }, { name: "b", kind: "standalone", url: "redis://a:6379" }] });
    expect(parseDeployments({ LOCKSCOPE_DEPLOYMENTS_FILE: "/shared.json" }, readFile)).toHaveLength(2);
    // Two databases of one server fail together: no more independent than one.
    expect(linesOf({ REDIS_URLS: "redis://a:6379/0,redis://a:6379/1,redis://b:6379" })).toEqual([
      "REDIS_URLS: URLs 1 and 2 name the same server (a:6379): a Redlock set's nodes must be independent servers, or one counts twice towards the quorum.",
    ]);
  });

  it("refuses a cluster's seeds that differ in scheme or credentials, which only the first seed's would apply", () => {
    expect(linesOf({ REDIS_CLUSTER_URLS: "redis://a:7000,rediss://b:7001", REDIS_TLS_CA_FILE: "/ca.pem" })).toEqual([
      "REDIS_CLUSTER_URLS: URL 2 differs from URL 1 in its scheme: every node of a cluster is reached with the first URL's TLS and credentials; give every URL the same.",
    ]);
    expect(linesOf({ REDIS_CLUSTER_URLS: "redis://a:7000,redis://lockscope:s3cret@b:7001,redis://:s3cret@c:7002" })).toEqual([
      "REDIS_CLUSTER_URLS: URL 2 differs from URL 1 in its user name and password: every node of a cluster is reached with the first URL's TLS and credentials; give every URL the same.",
      "REDIS_CLUSTER_URLS: URL 3 differs from URL 1 in its password: every node of a cluster is reached with the first URL's TLS and credentials; give every URL the same.",
    ]);
    files["/seeds.json"] = JSON.stringify({ deployments: [{ name: "sessions", kind: "cluster", seeds: ["rediss://:pw@a:7000", "redis://:pw@b:7000"], tls: {} }] });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/seeds.json" })).toEqual([
      'deployment "sessions": seeds: URL 2 differs from URL 1 in its scheme: every node of a cluster is reached with the first URL\'s TLS and credentials; give every URL the same.',
    ]);
    expect(parseDeployments({ REDIS_CLUSTER_URLS: "rediss://:pw@a:7000,rediss://:pw@b:7001", REDIS_TLS_CA_FILE: "/ca.pem" }, readFile)?.[0]).toMatchObject({ kind: "cluster" });
  });

  it("refuses what a cluster's seed URLs carry that no connection to the cluster reads: a query, a database", () => {
    expect(linesOf({ REDIS_CLUSTER_URLS: "redis://a:7000?password=s3cret,redis://b:7001?password=s3cret" })).toEqual([
      "REDIS_CLUSTER_URLS: URL 1 has query options (?…), which a cluster's connections do not read: give the password in the URL's user part (redis://:password@host) or in a password file.",
      "REDIS_CLUSTER_URLS: URL 2 has query options (?…), which a cluster's connections do not read: give the password in the URL's user part (redis://:password@host) or in a password file.",
    ]);
    files["/db.json"] = JSON.stringify({ deployments: [{ name: "sessions", kind: "cluster", seeds: ["redis://a:7000/2"] }] });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/db.json" })).toEqual(['deployment "sessions": seeds: URL 1 names database 2: a Redis Cluster has database 0 only; leave the path out.']);
    expect(parseDeployments({ REDIS_CLUSTER_URLS: "redis://a:7000/0,redis://b:7001/" }, readFile)?.[0]).toMatchObject({ kind: "cluster" });
  });

  it("takes a sentinel host name with an underscore, as a node URL's host may have (a Compose service name)", () => {
    expect(parseDeployments({ REDIS_SENTINELS: "redis_sentinel_1:26379,redis_sentinel_2:26379", REDIS_SENTINEL_MASTER: "locks" })?.[0]).toMatchObject({
      sentinels: [{ host: "redis_sentinel_1", port: 26379 }, { host: "redis_sentinel_2", port: 26379 }],
    });
    expect(parseDeployments({ REDIS_URL: "redis://redis_primary:6379" })?.[0]).toMatchObject({ url: "redis://redis_primary:6379" });
  });

  it("takes an empty tls in a deployments file for TLS with the system's CAs, not for no TLS", () => {
    const file = (d: object) => JSON.stringify({ deployments: [d] });
    const sentinel = file({ name: "payments", kind: "sentinel", sentinels: ["e:26379"], master: "payments", tls: {} });
    // A Sentinel deployment has no URL whose scheme could ask for TLS: `tls` is the only way to, CA file or not.
    expect(parseDeployments({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, () => sentinel)?.[0]?.tls).toEqual({ caFile: null, certFile: null, keyFile: null, servername: null });
    // Where no URL is rediss://, it is refused as any other TLS setting no URL would use.
    const plain = file({ name: "cache", kind: "standalone", url: "redis://d:1", tls: {} });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, () => plain)).toEqual(['deployment "cache": tls is set but no URL of it is rediss://: use rediss:// URLs for TLS.']);
  });

  it("reads a deployments file, and names each wrong field by its path", () => {
    const good = JSON.stringify({ deployments: [{ name: "payments", kind: "standalone", url: "rediss://p:6380", tls: { caFile: "/ca.pem" }, username: "lockscope", passwordFile: "/pw" }] });
    expect(parseDeployments({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? good : readFile(p)))).toEqual([
      { name: "payments", kind: "standalone", url: "rediss://p:6380", tls: { caFile: "/ca.pem", certFile: null, keyFile: null, servername: null }, auth: { username: "lockscope", passwordFile: "/pw" } },
    ]);
    const bad = JSON.stringify({
      deployments: [
        { name: "Payments!", kind: "redlock", urls: ["redis://a:1", "http://b:2"], master: "x" },
        { name: "s", kind: "sentinel", sentinels: ["a:1"] },
      ],
    });
    const at = 'LOCKSCOPE_DEPLOYMENTS_FILE="/d.json"';
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? bad : readFile(p)))).toEqual([
      `${at}: deployments[0].name="Payments!" is invalid: expected 1 to 40 lower-case letters, digits or '-'.`,
      `${at}: deployments[0].master does not apply to a redlock deployment.`,
      `${at}: deployments[0].urls: URL 2 ("http://b:2") is not a redis:// or rediss:// URL: expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.`,
      `${at}: deployments[1].master is missing: a sentinel deployment needs it.`,
    ]);
    // Several deployments, of any mix of kinds, are watched by one console.
    const several = JSON.stringify({
      deployments: [
        { name: "orders", kind: "redlock", urls: ["redis://a:1", "redis://b:1", "redis://c:1"] },
        { name: "cache", kind: "standalone", url: "redis://d:1" },
        { name: "payments", kind: "sentinel", sentinels: ["e:26379", "f:26379"], master: "payments" },
        { name: "sessions", kind: "cluster", seeds: ["redis://g:7000"] },
      ],
    });
    const parsed = parseDeployments({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? several : readFile(p)));
    expect(parsed?.map((d) => [d.name, d.kind])).toEqual([
      ["orders", "redlock"],
      ["cache", "standalone"],
      ["payments", "sentinel"],
      ["sessions", "cluster"],
    ]);
    expect(parsed?.[2]).toMatchObject({ sentinels: [{ host: "e", port: 26379 }, { host: "f", port: 26379 }], master: "payments" });
    // Each mistake is still its own line: a name used twice, and one too many deployments.
    const twice = JSON.stringify({ deployments: [{ name: "a", kind: "standalone", url: "redis://a:1" }, { name: "a", kind: "standalone", url: "redis://b:1" }] });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? twice : readFile(p)))).toEqual([
      `${at}: deployments[1].name="a" is used twice: each deployment needs its own name.`,
    ]);
    const many = JSON.stringify({ deployments: Array.from({ length: 33 }, (_, i) => ({ name: `d${i}`, kind: "standalone", url: `redis://h${i}:1` })) });
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? many : readFile(p)))).toEqual([
      `${at}: deployments: lists too many deployments: one console watches at most 32.`,
    ]);
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? "{not json" : readFile(p)))[0]).toMatch(/is not JSON/);
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? '{"deployments":[{"name":"a","kind":"etcd"}]}' : readFile(p)))[0]).toMatch(
      /deployments\[0\]\.kind: /,
    );
    expect(linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/nope.json", REDIS_URLS: "redis://a:1" })).toEqual([
      "LOCKSCOPE_DEPLOYMENTS_FILE and REDIS_URLS are both set: describe the deployments in one place.",
      'LOCKSCOPE_DEPLOYMENTS_FILE="/nope.json" cannot be read (ENOENT): expected a readable JSON file.',
    ]);
  });
  it("says where a deployments file is not JSON, in one line and without quoting the file (a URL's password)", () => {
    const problem = (text: string) => {
      const lines = linesOf({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? text : readFile(p)));
      expect(lines).toHaveLength(1);
      const [line = ""] = lines;
      expect(line).not.toMatch(/\n/);
      expect(line).not.toMatch(/s3cret|pw@db/);
      expect(line.startsWith('LOCKSCOPE_DEPLOYMENTS_FILE="/d.json" is not JSON (')).toBe(true);
      expect(line.endsWith('): expected {"deployments": [{"name": …, "kind": …}, …]}.')).toBe(true);
      return line;
    };
    // A comma left after the last URL (a password in it), in a list and in an object; a missing comma; a cut file.
    expect(problem('{"deployments": [\n  {"name": "orders", "kind": "redlock",\n   "urls": ["redis://:s3cret-pw@db",]}]}\n')).toMatch(/\(unexpected "]" at line 3, column 37\)/);
    expect(problem('{ "deployments": [\n  { "name": "orders", "kind": "standalone", "url": "redis://:s3cret-pw@db",\n  } ] }\n')).toMatch(/ at line 3, column 3\)/);
    expect(problem('{"deployments": [\n{"name": "a", "kind": "standalone" "url": "redis://:s3cret-pw@db"}]}')).toMatch(/ at line 2, column 36\)/);
    expect(problem('{"deployments": [\n')).toMatch(/ at line 2, column 1\)/);
  });
  it("reads a deployments file saved with a byte-order mark (Windows Notepad's UTF-8) as the same file without one", () => {
    const text = '{"deployments": [{"name": "orders", "kind": "standalone", "url": "redis://10.0.0.5:6379"}]}';
    const read = (content: string) => parseDeployments({ LOCKSCOPE_DEPLOYMENTS_FILE: "/d.json" }, (p) => (p === "/d.json" ? content : readFile(p)));
    expect(read(`\uFEFF${text}`)).toEqual(read(text));
  });
});
