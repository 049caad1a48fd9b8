import { randomBytes } from "node:crypto";
import vm from "node:vm";
import { describe, expect, it } from "vitest";
import { lockGroup, statelessPattern } from "@/lib/locks/groups";
import { ConfigError, maskRedisUrl, parseConfig, withoutArguments } from "@/lib/config";
import { DeploymentConfigError, maskUrl } from "@/lib/deployment-config";

function errorOf(env: Record<string, string>): ConfigError {
  try {
    parseConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("configuration", () => {
  it("defaults to embedded nodes on 127.0.0.1:3000 with the conventional lock names of the common libraries as patterns", () => {
    const config = parseConfig({});
    expect(config.redisUrls).toBeNull();
    expect(config.host).toBe("127.0.0.1");
    expect(config.port).toBe(3000);
    expect(config.lockPatterns).toEqual(["lock:*", "locks:*", "lock.*", "mutex:*", "semaphore:*", "job-lock:*", "lock", "my_resource_name"]);
    expect(config.auditFile).toBe(".lockscope/audit.jsonl");
    expect(config.operatorToken).toBeNull();
  });

  it("reads REDIS_URLS as a list of redis:// and rediss:// URLs", () => {
    const config = parseConfig({ REDIS_URLS: "redis://10.0.0.1:6380, rediss://:pw@10.0.0.2:6381,redis://h3:1" });
    expect(config.redisUrls).toEqual(["redis://10.0.0.1:6380", "rediss://:pw@10.0.0.2:6381", "redis://h3:1"]);
  });

  it("names the variable, the value and what was expected when REDIS_URLS is wrong", () => {
    const error = errorOf({ REDIS_URLS: "http://10.0.0.1:6379" });
    expect(error.variable).toBe("REDIS_URLS");
    expect(error.message).toContain('REDIS_URLS="http://10.0.0.1:6379"');
    expect(error.message).toContain("redis://");
    expect(error.message.split("\n")).toHaveLength(1);
    expect(errorOf({ REDIS_URLS: "redis://a:1,,redis://b:2" }).variable).toBe("REDIS_URLS");
  });

  it("says which of the REDIS_URLS is wrong, and how many it takes", () => {
    const expected = "expected comma-separated redis:// or rediss:// URLs of independent lock nodes, e.g. redis://127.0.0.1:6380,redis://127.0.0.1:6381, or unset for the embedded nodes";
    expect(errorOf({ REDIS_URLS: "redis://10.0.0.1:6379,redis//:s3cret@10.0.0.2:6379" }).message).toBe(
      `REDIS_URLS="redis://10.0.0.1:6379,redis//:****@10.0.0.2:6379" is invalid: ${expected} (URL 2 ("redis//:****@10.0.0.2:6379") is not a URL).`,
    );
    expect(errorOf({ REDIS_URLS: "redis://10.0.0.1:6379," }).message).toContain(" (URL 2 is empty).");
    expect(errorOf({ REDIS_URLS: "redis://10.0.0.1:163790" }).message).toContain(' (URL 1 ("redis://10.0.0.1:163790") is not a URL).');
    expect(errorOf({ REDIS_URLS: "rediss://h:1,http://h:2" }).message).toContain(' (URL 2 ("http://h:2") is not a redis:// or rediss:// URL).');
    const sixteen = Array.from({ length: 16 }, (_, i) => `redis://10.0.0.${i + 1}:6379`).join(",");
    expect(errorOf({ REDIS_URLS: sixteen }).message).toContain(" (16 URLs: at most 15).");
  });

  it("refuses a PORT that is not a port number", () => {
    for (const bad of ["abc", "0", "70000", "80.5", "-1", "0x1F90", "8e3", "0b11"]) {
      const error = errorOf({ PORT: bad });
      expect(error.variable).toBe("PORT");
      expect(error.message).toContain("1 to 65535");
    }
    expect(parseConfig({ PORT: " 8080 " }).port).toBe(8080);
  });

  it("refuses a LOCKSCOPE_PUBLIC_ORIGIN that is not an http(s) origin, naming the variable", () => {
    // A browser's Origin is never ftp:, ws: or "null" (file:, mailto:): the console would refuse every sign-in and
    // release; a path is not part of an origin (the console is served at the root).
    for (const bad of ["ftp://lockscope.example.com", "ws://lockscope.example.com", "file:///srv/lockscope", "mailto:ops@example.com", "https://example.com/lockscope", "https://example.com/?x=1", "https://ops:pw@example.com"]) {
      const error = errorOf({ LOCKSCOPE_PUBLIC_ORIGIN: bad });
      expect(error.variable, bad).toBe("LOCKSCOPE_PUBLIC_ORIGIN");
      expect(error.message).not.toContain("pw@");
    }
    expect(parseConfig({ LOCKSCOPE_PUBLIC_ORIGIN: "https://lockscope.example.com/" }).publicOrigin).toBe("https://lockscope.example.com");
    expect(parseConfig({ LOCKSCOPE_PUBLIC_ORIGIN: "http://10.0.0.5:8080" }).publicOrigin).toBe("http://10.0.0.5:8080");
  });

  it("reads whole-number settings as decimal digits only (no hex or exponent read as another number)", () => {
    const settings = ["HISTORY_RETENTION_DAYS", "LOCKSCOPE_NODE_TIMEOUT_MS", "METRICS_MAX_GROUPS", "LOCKSCOPE_MAX_STREAMS_PER_ADDRESS", "LOCKSCOPE_MAX_STREAMS_PER_TOKEN"];
    for (const variable of settings) {
      for (const bad of ["0x1e", "1e2", "0o17"]) expect(errorOf({ [variable]: bad }).variable, `${variable}=${bad}`).toBe(variable);
    }
    const config = parseConfig({ HISTORY_RETENTION_DAYS: "90", LOCKSCOPE_NODE_TIMEOUT_MS: " 750 ", METRICS_MAX_GROUPS: "0", LOCKSCOPE_MAX_STREAMS_PER_ADDRESS: "5" });
    expect([config.historyRetentionDays, config.nodeTimeoutMs, config.metricsMaxGroups, config.maxStreamsPerAddress]).toEqual([90, 750, 0, 5]);
  });

  it("keeps serving 5 s after SIGTERM by default, and refuses a shutdown delay that is not whole milliseconds from 0 to 60000", () => {
    expect(parseConfig({}).shutdownDelayMs).toBe(5_000);
    expect(parseConfig({ LOCKSCOPE_SHUTDOWN_DELAY_MS: "0" }).shutdownDelayMs).toBe(0);
    expect(parseConfig({ LOCKSCOPE_SHUTDOWN_DELAY_MS: "15000" }).shutdownDelayMs).toBe(15_000);
    for (const bad of ["5s", "-1", "60001", "2.5", "1e4"]) {
      const error = errorOf({ LOCKSCOPE_SHUTDOWN_DELAY_MS: bad });
      expect(error.message, bad).toBe(
        `LOCKSCOPE_SHUTDOWN_DELAY_MS=${JSON.stringify(bad)} is invalid: expected a whole number of milliseconds from 0 to 60000 that the console keeps serving, not ready, after SIGTERM (0: stop at once).`,
      );
    }
  });

  it("refuses short tokens and a viewer token equal to the operator token", () => {
    expect(errorOf({ LOCKSCOPE_OPERATOR_TOKEN: "short" }).variable).toBe("LOCKSCOPE_OPERATOR_TOKEN");
    const same = "abcdefghijklmnopqrstuvwxyz";
    expect(errorOf({ LOCKSCOPE_OPERATOR_TOKEN: same, LOCKSCOPE_VIEWER_TOKEN: same }).variable).toBe("LOCKSCOPE_VIEWER_TOKEN");
  });

  it("refuses a scrape token or a session secret that is also the operator's or the viewer's token", () => {
    // Random, as a session secret must be: the one refused below is refused for being a token, not for being weak.
    const operator = "l8h0TsNoAdUM/3V/z+Z4RhNoVG7d0ny0mortMT0pxrU=";
    const viewer = "klmUoDxjEdsEPAsnnhpwNmCzGMpBZ2QKyxz4aGHF4uk=";
    const metrics = "cIV/i24E0hoyOZLEw78JV1Bw2K+oFlUhjHj3usSD0js=";
    const both = { LOCKSCOPE_OPERATOR_TOKEN: operator, LOCKSCOPE_VIEWER_TOKEN: viewer };
    // The scrape token sits in Prometheus's configuration: it must not also release locks, or read them.
    for (const same of [operator, viewer]) {
      const error = errorOf({ ...both, METRICS_TOKEN: same });
      expect([error.variable, error.expected]).toEqual(["METRICS_TOKEN", "a token different from LOCKSCOPE_OPERATOR_TOKEN and LOCKSCOPE_VIEWER_TOKEN"]);
      expect(error.message).not.toContain(same);
    }
    // Whoever knows the key that signs session cookies can make one for any role: no token may be that key.
    for (const same of [operator, viewer, metrics]) {
      const error = errorOf({ ...both, METRICS_TOKEN: metrics, LOCKSCOPE_SESSION_SECRET: same });
      expect([error.variable, error.expected]).toEqual(["LOCKSCOPE_SESSION_SECRET", "a secret different from every token (LOCKSCOPE_OPERATOR_TOKEN, LOCKSCOPE_VIEWER_TOKEN, METRICS_TOKEN)"]);
      expect(error.message).not.toContain(same);
    }
  });

  it("refuses a session secret that is short or not random, naming the variable, the minimum and how to make one, never the secret", () => {
    for (const [weak, why] of [
      ["unit-session-secret-0123456789", "(it is 30 characters long)"],
      ["passwordpasswordpasswordpassword", "(its characters vary too little for random bytes"],
      // 16 random bytes in hex: 32 characters, half the randomness asked for.
      ["9f86d081884c7d659a2feaa0c55ad015", "(its characters vary too little for random bytes"],
      ["it-replicas-session-secret-0123456789", "(its characters vary too little for random bytes"],
    ] as const) {
      const error = errorOf({ LOCKSCOPE_SESSION_SECRET: weak });
      expect(error.variable).toBe("LOCKSCOPE_SESSION_SECRET");
      expect(error.message).toMatch(/^LOCKSCOPE_SESSION_SECRET=\(hidden, \d+ characters\) is invalid: expected a random secret of at least 32 printable characters/);
      expect(error.message).toContain("make one with `openssl rand -base64 32`");
      expect(error.message).toContain(why);
      expect(error.message).not.toContain(weak);
    }
    // What the README and the errors say to use: 32 random bytes, in base64 or hex.
    for (const strong of ["AyyzuYm9Eq22LGcwDzFD4fHgj29SKJMQcpuWYVxIXVE=", "ZE1GAa7aIySZbmlr1d1gQaJBZdpHXkdk6GGlCW9l48g", randomBytes(32).toString("hex")]) {
      expect(parseConfig({ LOCKSCOPE_SESSION_SECRET: strong }).sessionSecret).toBe(strong);
    }
  });

  it("refuses an unknown log level and a bad metrics group pattern", () => {
    expect(errorOf({ LOG_LEVEL: "loud" }).message).toContain("one of fatal, error");
    expect(errorOf({ METRICS_GROUP_PATTERN: "([" }).variable).toBe("METRICS_GROUP_PATTERN");
  });

  it("refuses a metrics group pattern without a capture group, which would put every lock in `other`", () => {
    const noGroup = errorOf({ METRICS_GROUP_PATTERN: "^[^:]+:[^:/]+" });
    expect(noGroup.variable).toBe("METRICS_GROUP_PATTERN");
    expect(noGroup.message).toBe(
      'METRICS_GROUP_PATTERN="^[^:]+:[^:/]+" is invalid: expected a regular expression whose first group names a lock\'s group for metrics labels, e.g. ^([^:]+:[^:/]+) (it has no capture group: wrap the part that names the group in parentheses).',
    );
    // A group that does not capture does not count; a named one does.
    expect(errorOf({ METRICS_GROUP_PATTERN: "^(?:lock):[a-z]+" }).variable).toBe("METRICS_GROUP_PATTERN");
    expect(parseConfig({ METRICS_GROUP_PATTERN: "^(?<group>[^:]+)" }).metricsGroupPattern.exec("lock:a")?.[1]).toBe("lock");
  });

  it("groups by a metrics group pattern that would backtrack without end, and takes no time over a key built to stall it", () => {
    // An operator's pattern with a nested quantifier, and a key that almost matches it: a backtracking matcher
    // tries 2^60 ways before it gives up, with the console's only thread busy all that time.
    const config = parseConfig({ METRICS_GROUP_PATTERN: "^lock:((a+)+)$" });
    // An operator's pattern runs in V8's linear-time engine; the default, which cannot backtrack, in its usual one.
    expect(config.metricsGroupPattern.flags).toContain("l");
    expect(parseConfig({}).metricsGroupPattern.flags).not.toContain("l");
    const pattern = statelessPattern(config.metricsGroupPattern);
    const stall = `lock:${"a".repeat(60)}!`;
    // (Bounded only so that a matcher that never returns fails the test rather than hanging it.)
    const groupOf = (resource: string) => vm.runInNewContext("lockGroup(pattern, resource)", { lockGroup, pattern, resource }, { timeout: 20_000 }) as string;
    expect(groupOf(stall)).toBe("other");
    expect(groupOf("lock:aaa")).toBe("aaa");
    expect(groupOf("lock:orders/42")).toBe("other");
  });

  it("refuses a metrics group pattern that cannot be matched in time proportional to the key, saying why", () => {
    for (const pattern of ["^(lock):\\1", "^(lock)(?=:)", "^(?<!x)(lock)"]) {
      const error = errorOf({ METRICS_GROUP_PATTERN: pattern });
      expect(error.variable, pattern).toBe("METRICS_GROUP_PATTERN");
      expect(error.message, pattern).toMatch(/backreferences and lookarounds are not supported: a lock key's name must not be able to stall the console/);
    }
  });

  it("says which of the LOCK_PATTERNS is empty (a comma too many), not that it is listed twice", () => {
    expect(errorOf({ LOCK_PATTERNS: "lock:*," }).message).toMatch(/ \(pattern 2 is empty: a comma too many\?\)\.$/);
    expect(errorOf({ LOCK_PATTERNS: "lock:*,,mutex:*" }).message).toMatch(/ \(pattern 2 is empty: a comma too many\?\)\.$/);
    expect(errorOf({ LOCK_PATTERNS: "lock:*,,mutex:*,," }).message).not.toContain("listed twice");
    expect(errorOf({ LOCK_PATTERNS: " , lock:*" }).message).toMatch(/ \(pattern 1 is empty: a comma too many\?\)\.$/);
  });

  it("refuses LOCK_PATTERNS that match the console's own keys, match only keys kept beside locks, or list a glob twice", () => {
    const everything = errorOf({ LOCK_PATTERNS: "lock:*,*" });
    expect(everything.variable).toBe("LOCK_PATTERNS");
    expect(everything.message).toContain("`*` matches `lockscope:audit`, one of the console's own keys");
    expect(errorOf({ LOCK_PATTERNS: "lockscope:c*" }).message).toContain("matches `lockscope:consoles`");
    expect(errorOf({ LOCK_PATTERNS: "fence:orders:*" }).message).toContain("matches only keys under `fence:*`");
    // However the glob is spelt: a class of one character, `?` in place of a known one.
    for (const glob of ["[l]ockscope:wrong-token:address:*", "[l]ockscope:lab:run:*:series", "lockscop[e]:lease:patterns"]) {
      expect(errorOf({ LOCK_PATTERNS: glob }).message, glob).toMatch(/the console's own keys/);
    }
    for (const glob of ["[f]ence:*", "fenc[e]:*", "w[a]itq:*", "*:rwlock_timeout:*", "redisson_lock_[q]ueue:*"]) {
      expect(errorOf({ LOCK_PATTERNS: glob }).message, glob).toContain("matches only keys under");
    }
    // Patterns that name locks elsewhere stay allowed, also where some key could meet a console key's shape.
    for (const glob of ["lock:*", "*:orders", "job-lock:*", "[a-z]*:lock", "mutex:?", "*waitq:*"]) expect(() => parseConfig({ LOCK_PATTERNS: glob }), glob).not.toThrow();
    expect(errorOf({ LOCK_PATTERNS: "lock:*,mutex:*,lock:*" }).message).toContain("`lock:*` is listed twice");
    expect(parseConfig({ LOCK_PATTERNS: "lock:*,*:orders:*,a/*" }).lockPatterns).toEqual(["lock:*", "*:orders:*", "a/*"]);
  });

  it("names a wrong secret but never shows its value", () => {
    const secret = "hunter2-but-with-spaces and more";
    for (const variable of ["LOCKSCOPE_OPERATOR_TOKEN", "LOCKSCOPE_VIEWER_TOKEN", "METRICS_TOKEN", "LOCKSCOPE_SESSION_SECRET"]) {
      const error = errorOf({ [variable]: secret });
      expect(error.variable).toBe(variable);
      expect(error.message).toContain(variable);
      expect(error.message).not.toContain("hunter2");
      expect(error.value).not.toContain("hunter2");
      expect(JSON.stringify(error)).not.toContain("hunter2");
    }
    const same = "abcdefghijklmnopqrstuvwxyz";
    expect(errorOf({ LOCKSCOPE_OPERATOR_TOKEN: same, LOCKSCOPE_VIEWER_TOKEN: same }).message).not.toContain(same);
  });

  it("masks passwords of URLs in a wrong value", () => {
    const error = errorOf({ REDIS_URLS: "redis://:s3cret@10.0.0.1:6380,http://user:pa55@10.0.0.2:6381" });
    expect(error.message).not.toContain("s3cret");
    expect(error.message).not.toContain("pa55");
    expect(error.message).toContain("10.0.0.2:6381");
    // ioredis takes a password from the query too.
    const inQuery = errorOf({ REDIS_URLS: "redis://10.0.0.1:6380?password=s3cret,redis//10.0.0.2:6381" });
    expect(inQuery.variable).toBe("REDIS_URLS");
    expect(inQuery.message).not.toContain("s3cret");
  });

  it("never shows a password that breaks its URL (a `/` or `@` in it, as `openssl rand -base64` makes)", () => {
    // The URL does not parse, so the start stops on it: the message must still hide the password.
    const database = errorOf({ AUDIT_DATABASE_URL: "postgres://lockscope:Zq/8SECRETx+w=@postgres:5432/lockscope" });
    expect(database.variable).toBe("AUDIT_DATABASE_URL");
    expect(database.message).not.toContain("SECRET");
    expect(database.message).toContain("@postgres:5432/lockscope");
    const nodes = errorOf({ REDIS_URLS: "redis://:pa/SECRET@10.0.0.1:6380,redis://:p@SECRET@10.0.0.2:6381,http://10.0.0.3:6382" });
    expect(nodes.message).not.toContain("SECRET");
    expect(nodes.message).toContain("10.0.0.2:6381");
    expect(maskUrl("redis://:p@SECRET@h:1/0")).toBe("redis://:****@h:1/0");
    expect(maskUrl("redis://u:a/SECRET@h:1,redis://h2:2")).toBe("redis://u:****@h:1,redis://h2:2");
  });

  it("never shows a password in a URL whose scheme is mistyped or missing, or whose password holds a space", () => {
    // Each value stops the start; the line must name what is wrong without the password, and still show the host.
    const refused = (env: Record<string, string>): string => {
      try {
        parseConfig(env);
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        if (error instanceof DeploymentConfigError) return error.lines.join("\n");
        throw error;
      }
      throw new Error(`expected ${JSON.stringify(Object.keys(env))} to be refused`);
    };
    const cases: Array<Record<string, string>> = [
      { AUDIT_DATABASE_URL: "postgres:/lockscope:pwSECRET@db:5432/lockscope" },
      { AUDIT_DATABASE_URL: "lockscope:pwSECRET@db:5432/lockscope" },
      { AUDIT_DATABASE_URL: "postgres://lockscope:pw SECRET@db:5432/lockscope?sslmode=bogus" },
      { REDIS_URLS: "redis:/:pwSECRET@db:6379" },
      { REDIS_URLS: "redis://:pw SECRET@db:6379,http://other:6379" },
      { REDIS_URL: "pwSECRET@db:6379" },
      { REDIS_URL: ":pwSECRET@db:6379" },
      { REDIS_CLUSTER_URLS: "redis:lockscope:pwSECRET@db:7000" },
      { REDIS_SENTINELS: "lockscope:pwSECRET@db:26379", REDIS_SENTINEL_MASTER: "locks" },
    ];
    for (const env of cases) {
      const message = refused(env);
      expect(message, JSON.stringify(env)).not.toContain("SECRET");
      expect(message, JSON.stringify(env)).toContain("@db:");
    }
    const deploymentsFile = (json: unknown): string => {
      try {
        parseConfig({ LOCKSCOPE_DEPLOYMENTS_FILE: "/etc/lockscope/deployments.json" }, { readFile: () => JSON.stringify(json) });
      } catch (error) {
        if (error instanceof DeploymentConfigError) return error.lines.join("\n");
        throw error;
      }
      throw new Error("expected the deployments file to be refused");
    };
    const file = deploymentsFile({ deployments: [{ name: "a", kind: "sentinel", sentinels: ["u:pwSECRET@db:26379"], master: "m" }, { name: "b", kind: "standalone", url: "redis:/:pwSECRET@db:6379" }] });
    expect(file).not.toContain("SECRET");
    expect(file).toContain("@db:");
  });

  it("reads ALLOWED_HOSTS as host names without ports", () => {
    expect(parseConfig({}).allowedHosts).toEqual([]);
    expect(parseConfig({ ALLOWED_HOSTS: "Lockscope.internal, 10.0.0.5,[::1]" }).allowedHosts).toEqual(["lockscope.internal", "10.0.0.5", "[::1]"]);
    for (const bad of ["evil.example:3000", "http://x", "a b", "*"]) expect(errorOf({ ALLOWED_HOSTS: bad }).variable).toBe("ALLOWED_HOSTS");
  });

  it("masks passwords in node URLs", () => {
    expect(maskRedisUrl("redis://user:secret@10.0.0.1:6379")).toBe("redis://user:****@10.0.0.1:6379");
    expect(maskRedisUrl("redis://10.0.0.1:6379")).toBe("redis://10.0.0.1:6379");
    // ioredis also takes the password (and any option) from the query.
    expect(maskRedisUrl("redis://10.0.0.1:6379/0?password=s3cret&family=4")).toBe("redis://10.0.0.1:6379/0?password=****&family=4");
    expect(maskRedisUrl("rediss://u:p@h:6380/?sentinelPassword=x&tls=true")).toBe("rediss://u:****@h:6380/?sentinelPassword=****&tls=true");
    expect(maskUrl("redis://h:1/0?password=s3cret&db=2 and rediss://a:b@h2")).toBe("redis://h:1/0?password=****&db=2 and rediss://a:****@h2");
  });

  it("leaves out the command arguments Redis repeats in an error, keeping the rest of its lines", () => {
    // Redis 7 quotes them with single quotes, Redis 6 with backticks; a stack's later lines stay.
    expect(withoutArguments("ReplyError: ERR unknown command 'auth', with args beginning with: 'lockscope' 'hunter2' \n    at parse (x.js:1:1)")).toBe(
      "ReplyError: ERR unknown command 'auth', with args beginning with: [redacted]\n    at parse (x.js:1:1)",
    );
    expect(withoutArguments("ERR unknown command `publish`, with args beginning with: `lockscope:revoked`, `{\"value\":\"tok\"}`, ")).toBe(
      "ERR unknown command `publish`, with args beginning with: [redacted]",
    );
    expect(withoutArguments("NOPERM this user has no permissions to run the 'eval' command")).toBe("NOPERM this user has no permissions to run the 'eval' command");
  });

  it("can leave out the whole echo, for a sentence that names only the command refused", () => {
    expect(withoutArguments("ERR unknown command 'evalsha', with args beginning with: 'f00d' '0' \n    at parse (x.js:1:1)", { drop: true })).toBe(
      "ERR unknown command 'evalsha'\n    at parse (x.js:1:1)",
    );
    expect(withoutArguments("NOPERM this user has no permissions to run the 'eval' command", { drop: true })).toBe("NOPERM this user has no permissions to run the 'eval' command");
  });
});
