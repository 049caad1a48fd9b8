import { NO_STRING, UUID_SOURCE, formatReading, stringValue } from "./common";
import { STRING_COMPARE_DELETE, scriptRelease } from "./release";
import { defineFormat, type FormatHolder } from "./types";

/**
 * ShedLock's Redis providers (Spring Data, Jedis, Lettuce, Quarkus): `SET <prefix>:<env>:<task> <value> NX PX
 * <lockAtMostFor>`, where the prefix defaults to `job-lock` and the environment to `default`
 * (`InternalRedisLockProvider.DEFAULT_KEY_PREFIX`, `ENV_DEFAULT`), and the value is
 * `ADDED:<ISO-8601 instant>@<hostname>` (older providers) or `ADDED:<instant>@<hostname>:<random UUID>` (newer
 * ones, so that unlock can compare-and-delete). Unlocking before `lockAtLeastFor` keeps the key and only
 * shortens its TTL. A task that finds the key taken is skipped, not queued: there are no waiters to wake, and
 * a ShedLock lock lives on the one Redis the provider talks to.
 */

const VALUE = new RegExp(`^ADDED:([^@]{10,64})@(.*?)(?::(${UUID_SOURCE}))?$`);

export function decodeShedLockValue(value: string): { since: number | null; host: string } | null {
  const match = VALUE.exec(value);
  if (!match) return null;
  const since = Date.parse(match[1] as string);
  return { since: Number.isFinite(since) ? since : null, host: match[2] as string };
}

export const shedlock = defineFormat({
  name: "shedlock",
  description: "ShedLock (JVM scheduled-task locks): holder host and the time the task started",
  redisTypes: ["string"],
  keyPatterns: ["job-lock:*"],
  scope: "single",
  contention: null,
  notify: ["$"],
  recognise: (_key, raw) => raw.type === "string" && decodeShedLockValue(raw.value) !== null,
  decode(_key, reading) {
    const { value, truncated, fingerprint, valueDigest } = stringValue(reading) ?? NO_STRING;
    const decoded = decodeShedLockValue(value);
    const holder: FormatHolder = { id: value };
    if (decoded?.host) holder.host = decoded.host;
    if (decoded?.since != null) holder.since = decoded.since;
    return formatReading("shedlock", "string", reading, { holders: [holder], fingerprint, truncated, valueDigest });
  },
  release: scriptRelease(STRING_COMPARE_DELETE, { holder: false, waiters: false }),
});
