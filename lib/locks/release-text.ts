import type { Lock } from "./types";

/**
 * A ShedLock value that ends in the provider's own UUID (lib/locks/formats/shedlock.ts reads the same shape; that
 * module runs on the server only, this text is shown in the browser too).
 */
const SHEDLOCK_OWN_VALUE = /^ADDED:[^@]{10,64}@.*:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Who hears about a force release, and what the holder does next, per format: what the release dialog tells the
 * operator before they confirm. Only this engine's holders listen for a revocation. A foreign holder is never
 * told and keeps working (and writing) until its next extend or release, while a waiter may take the lock the
 * same millisecond; some libraries' release then deletes the key whoever holds it.
 */
export function whoIsTold(lock: Pick<Lock, "format" | "holders">): string {
  switch (lock.format) {
    case "lockscope":
      return "A holder running in using() hears it and its signal aborts at once; one that took the lock with a plain acquire finds out at its next extend or release. The fence moves on, so its late fenced writes are refused; the next waiter is woken.";
    case "redisson":
      return "The Redisson holder is not told: it keeps working, and writing, until its next renewal or unlock finds the lock gone. Its waiters are woken with Redisson's unlock message, and one may take the lock at once.";
    case "redisson-rw":
      return "That one holder is taken out and is not told: it keeps working until its next renewal or unlock. When it was the last holder, the waiters are woken and one may take the lock at once.";
    case "redis-semaphore":
      return "The holder is not told (redis-semaphore listens for no revocation): it keeps working until its next refresh or release finds its permit gone, while another client may take the freed permit at once.";
    case "shedlock":
      // ShedLock's Redis providers that write a value of their own (`ADDED:<instant>@<host>:<uuid>`: Spring Data,
      // Jedis, Lettuce) unlock, and before lockAtLeastFor shorten the TTL, only while the key holds that value.
      // Older ones (a value without the UUID) unlock with a plain DEL, or before lockAtLeastFor with SET XX of a
      // new value: neither looks at who holds the key.
      if (SHEDLOCK_OWN_VALUE.test(lock.holders[0]?.id ?? "")) {
        return "The job holding it is not told: it runs on, while another instance may start the same job at its next schedule. When the released job ends, its unlock finds the lock no longer holds its value and leaves it to the instance that took it over.";
      }
      return "The job holding it is not told: it runs on, while another instance may start the same job at its next schedule. When the released job ends, ShedLock's unlock deletes the lock (or, before its lockAtLeastFor, rewrites it) whoever holds it then: the instance that took it over may lose it to a third.";
    default:
      // redis-lock (and the SETNX pattern it follows) keeps its expiry in the value and unlocks with a plain DEL
      // while that time has not come, whoever holds the key by then.
      if (lock.format === "token" && lock.holders[0]?.expiresAt !== undefined) {
        return "The holder is not told (its library listens for no revocation): it keeps working, and writing, while another client may take the lock the same millisecond. This lock keeps its expiry in its value, as redis-lock writes it: such a library unlocks by deleting the key whoever holds it, so the released holder's unlock will free the lock under the client that took it over.";
      }
      return "The holder is not told (its library listens for no revocation): it keeps working, and writing, until its next extend or release, while another client may take the lock the same millisecond.";
  }
}

/** A force release's copies on the replicas of the primary it deleted on (`POST …/release`'s `replication`). */
export interface ReleaseCopies {
  primary: string;
  replicas: Array<{ address: string; hasRelease: boolean }>;
}

/**
 * What the operator must know when replicas have not copied the release yet (null when every replica has it, or
 * there are none): replication is asynchronous, and a replica promoted before it copies the delete serves the
 * lock again, to its old holder.
 */
export function replicationWarning(copies: ReleaseCopies | undefined): string | null {
  if (!copies) return null;
  const without = copies.replicas.filter((r) => !r.hasRelease).map((r) => r.address);
  if (without.length === 0) return null;
  const of = copies.replicas.length;
  const list = without.join(", ");
  const who =
    without.length === 1
      ? `${of === 1 ? "The replica" : `1 of the ${of} replicas`} (${list}) had not copied the release within 1.2 s: if it is promoted before it does`
      : `${without.length === of ? `None of the ${of} replicas` : `${without.length} of the ${of} replicas`} (${list}) had ${without.length === of ? "" : "not "}copied the release within 1.2 s: if one of ${without.length === of ? "them" : "those"} is promoted before it does`;
  return `${who}, the lock is back, held by the same holder. Watch the lock's page if a failover is under way.`;
}
