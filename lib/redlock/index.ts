export type { ForceReleaseClient, RedlockClient, ScriptClient, SubscriberClient } from "./client";
export * from "./errors";
export { fencedSet, fencedWrite, type FencedOperation, type FencedWriteResult } from "./fenced-write";
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
