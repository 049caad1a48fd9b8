import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { NodeDots } from "@/components/locks/lock-bits";
import { holderText } from "@/lib/locks/holder-text";
import type { Lock } from "@/lib/locks/types";

/** A partial lock of a five-node Redlock set: no value on a quorum (3); `leading` as the console names it. */
function partial(tokens: Array<string | null>, leading: string | null = "b-value"): Lock {
  const lock: Lock = {
    resource: "lock:orders/7",
    deployment: "default",
    state: "partial",
    format: "token",
    redisType: "string",
    scope: "quorum",
    holders: [{ id: "b-value" }],
    warnings: [],
    token: null,
    holder: null,
    fence: null,
    nodes: tokens.map((token, i) => ({ id: `node-${i}`, up: true, token, pttlMs: token === null ? null : 30_000 })),
    quorumHeld: 2,
    quorum: 3,
    expiresAt: Date.now() + 30_000,
    ttlMs: 30_000,
    contention: { attemptsPerMin: null, waiters: null, source: null },
  };
  if (leading !== null) lock.leading = leading;
  return lock;
}

const dotLabels = (lock: Lock) => [...renderToStaticMarkup(createElement(NodeDots, { lock })).matchAll(/aria-label="([^"]*)"/g)].map((m) => m[1]);

describe("a lock's node dots", () => {
  it("mark the value most nodes hold as the lock's, as the quorum text beside them counts it, not the first node's", () => {
    // node-0 holds a stray value; the most common one (2 of 5, the "2/5" shown) is on node-1 and node-2.
    expect(dotLabels(partial(["a-value", "b-value", "b-value", null, null]))).toEqual([
      "node-0: holds another value",
      "node-1: holds this value",
      "node-2: holds this value",
      "node-3: holds nothing",
      "node-4: holds nothing",
    ]);
  });

  it("mark no node's value as the lock's in a split vote with no side ahead, and name no holder, whichever node holds which", () => {
    for (const tokens of [
      ["a-value", "a-value", "b-value", "b-value", null],
      ["b-value", "a-value", null, "b-value", "a-value"],
    ]) {
      const lock = partial(tokens, null);
      expect(dotLabels(lock).filter((label) => label?.endsWith("holds this value"))).toEqual([]);
      expect(holderText(lock)).toBe("split vote: no value leads");
    }
    // The value the console names as leading is the holder shown.
    expect(holderText(partial(["a-value", "b-value", "b-value", null, null]))).toBe("raw b-value");
  });
});
