// The package's public entry point: everything a caller may use, and nothing else (the operations'
// internals, the resolved-settings shape and the lock's constructor stay inside the package).
export type { ForceReleaseClient, RedlockClient, ScriptClient, SubscriberClient } from "./client.ts";
export * from "./errors.ts";
export { fencedSet, fencedWrite, type FencedOperation, type FencedWriteOptions, type FencedWriteResult } from "./fenced-write.ts";
export type { ReseedResult } from "./reseed.ts";
export {
  forceRelease,
  type ForceReleaseNodeResult,
  type ForceReleaseOptions,
  type ForceReleaseResult,
} from "./force-release.ts";
export { decodeLockValue, encodeLockValue, lockValueId, type HolderIdentity, type LockValueFields } from "./identity.ts";
export * from "./keys.ts";
export { hashTagOf, keyInSlotOf, keySlot, SLOT_COUNT } from "./slot.ts";
export { acquireNaive, releaseNaive, type NaiveAcquireOptions, type NaiveLockClient, type NaiveTransaction } from "./naive.ts";
export * from "./telemetry.ts";
export { Redlock } from "./redlock.ts";
export type { RedlockLock, ReleaseResult } from "./lock.ts";
export type { AcquireOptions } from "./acquire.ts";
export type { UsingRoutine } from "./using.ts";
export type { RedlockEvents } from "./events.ts";
export { DEFAULT_SETTINGS, SETTING_NAMES, type RedlockSettings } from "./settings.ts";
export { quorumOf } from "./round.ts";
export { defineScript, isClusterClient, runScript, type Script } from "./script.ts";
export { abortableSleep } from "./sleep.ts";
export { setReplyDeadline } from "./reply-deadline.ts";
