export type { ForceReleaseClient, RedlockClient, ScriptClient, SubscriberClient } from "./client";
export * from "./errors";
export { fencedSet, fencedWrite, type FencedOperation, type FencedWriteOptions, type FencedWriteResult } from "./fenced-write";
export type { ReseedResult } from "./reseed";
export {
  forceRelease,
  type ForceReleaseNodeResult,
  type ForceReleaseOptions,
  type ForceReleaseResult,
} from "./force-release";
export { decodeLockValue, encodeLockValue, lockValueId, type HolderIdentity, type LockValueFields } from "./identity";
export * from "./keys";
export { acquireNaive, releaseNaive, type NaiveAcquireOptions, type NaiveLockClient, type NaiveTransaction } from "./naive";
export * from "./telemetry";
export { Redlock } from "./redlock";
export { Lock, type ReleaseResult } from "./lock";
export type { AcquireOptions } from "./acquire";
export type { UsingRoutine } from "./using";
export type { RedlockEvents } from "./events";
export { DEFAULT_SETTINGS, type RedlockSettings, type ResolvedSettings } from "./settings";
