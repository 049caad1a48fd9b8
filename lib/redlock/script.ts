import { createHash } from "node:crypto";

/** A Lua script with its SHA1, computed once, so calls send the 40-byte digest instead of the source. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

export function defineScript(source: string): Script {
  return Object.freeze({ source, sha: createHash("sha1").update(source).digest("hex") });
}
