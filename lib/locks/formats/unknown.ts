import { formatReading } from "./common";
import { defineFormat } from "./types";

/**
 * Any key under the lock patterns that no format recognises: listed with its Redis type, never skipped, so an
 * operator sees that something is there and which type it is. It has no holders the console can name, so it
 * cannot be compared-and-deleted: force release refuses it (nothing is touched).
 */
export const unknown = defineFormat({
  name: "unknown",
  description: "A key under the lock patterns whose layout no format knows: shown with its Redis type",
  redisTypes: [],
  keyPatterns: [],
  scope: "inferred",
  contention: null,
  notify: [],
  recognise: (_key, raw) => raw.type !== "none",
  // Discovery suggests only what it recognises: an unknown key outside the patterns is just a key.
  discoverable: () => false,
  decode(_key, reading) {
    const raw = reading.raw;
    const redisType = raw.type === "other" ? raw.redisType : raw.type;
    // A string no other format claims is a token; this is reached for other layouts only, so the type is
    // the fingerprint: nodes with a key of the same type agree.
    return formatReading("unknown", redisType, reading, { holders: [], fingerprint: `type:${redisType}` });
  },
  release: null,
});
