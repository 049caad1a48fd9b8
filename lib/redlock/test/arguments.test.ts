import { describe, expect, it, vi } from "vitest";
import CompatRedlock from "../compat.ts";
import { AcquireAbortedError, abortableSleep, acquireNaive, DEFAULT_SETTINGS, fencedWrite, forceRelease, Redlock, type NaiveLockClient, type RedlockClient, type SubscriberClient } from "../index.ts";

/** A client that records what it is asked and answers nothing: these tests must fail before any command. */
function fakeClient(calls: string[]): RedlockClient {
  return {
    evalsha: (sha) => {
      calls.push(`evalsha ${sha}`);
      return new Promise(() => {});
    },
    eval: () => {
      calls.push("eval");
      return new Promise(() => {});
    },
    set: () => {
      calls.push("set");
      return new Promise(() => {});
    },
    duplicate: (): SubscriberClient => {
      throw new Error("not in this test");
    },
  };
}

describe("bad arguments fail at the entry point with a TypeError naming the argument", () => {
  const calls: string[] = [];
  const clients = [fakeClient(calls), fakeClient(calls), fakeClient(calls)];
  const redlock = new Redlock(clients);

  it.each([
    [() => redlock.acquire(["lock:a"], -5), "Expected `ttlMs` to be a positive integer, got `-5` (number)"],
    [() => redlock.acquire(["lock:a"], 1.5), "Expected `ttlMs` to be a positive integer, got `1.5` (number)"],
    // No validity could ever be left: refused rather than tried until the retries run out ("too slow").
    [() => redlock.acquire(["lock:a"], 2), "Expected `ttlMs` to be greater than its clock drift allowance (round(driftFactor × ttlMs) + 2 = 2 ms), or no validity could ever be left, got `2` (number)"],
    [() => new Redlock(clients, { driftFactor: 0.5 }).acquire(["lock:a"], 4), "Expected `ttlMs` to be greater than its clock drift allowance (round(driftFactor × ttlMs) + 2 = 4 ms)"],
    [() => redlock.acquire([], 1000), "Expected `resources` to be a non-empty array of non-empty strings, got `` (array)"],
    [() => redlock.acquire("lock:a" as unknown as string[], 1000), "Expected `resources` to be a non-empty array of non-empty strings"],
    [() => redlock.acquire(["lock:a", "lock:a"], 1000), "Expected `resources` to be an array without duplicates"],
    [() => redlock.acquire(["lock:a"], 1000, { retryCount: -2 }), "Expected `retryCount` to be a non-negative integer, got `-2` (number)"],
    [() => redlock.acquire(["lock:a"], 1000, { fenced: "yes" as unknown as boolean }), "Expected `fenced` to be a boolean"],
    [() => redlock.acquire(["lock:a"], 1000, { signal: {} as AbortSignal }), "Expected `signal` to be an AbortSignal"],
    // Something with `aborted` that cannot be listened to: it failed only once a contended acquisition slept,
    // with "signal.addEventListener is not a function", after its attempt had been sent and queued on the nodes.
    [() => redlock.acquire(["lock:a"], 1000, { signal: { aborted: false } as AbortSignal }), "Expected `signal` to be an AbortSignal, got `[object Object]` (object)"],
    [() => redlock.using(["lock:a"], 300, () => 1), "Expected `ttlMs` to be greater than `automaticExtensionThresholdMs` (500) plus its clock drift allowance (round(driftFactor × ttlMs) + 2 = 5 ms)"],
    // Validity would start at or below the threshold: the lock was extended back-to-back (about 170 rounds a
    // second on local nodes) for as long as the routine ran. 507 ms is the longest TTL refused with the defaults.
    [() => redlock.using(["lock:a"], 507, () => 1), "Expected `ttlMs` to be greater than `automaticExtensionThresholdMs` (500) plus its clock drift allowance (round(driftFactor × ttlMs) + 2 = 7 ms), or the lock would be extended back-to-back, got `507` (number)"],
    [() => redlock.using(["lock:a"], 1000, {}, undefined as unknown as () => void), "Expected `routine` to be a function"],
    [() => forceRelease(clients, "lock:a", { nodeTimeoutMs: 0 }), "Expected `nodeTimeoutMs` to be a positive integer of at most 2147483647 (ms, the longest timer Node.js honours), got `0` (number)"],
    [() => forceRelease(clients, ""), "Expected `resource` to be a non-empty string"],
    [() => fencedWrite(clients[0]!, "stock", "01", { type: "del" }), "Expected `fence` to be a decimal fence string, got `\"01\"` (string)"],
    [() => fencedWrite(clients[0]!, "stock", "1", { type: "incrby", by: 0.5 }), "Expected `operation.by` to be an integer"],
    [() => fencedWrite(clients[0]!, "stock", "1", { type: "del" }, { timeoutMs: 0 }), "Expected `timeoutMs` to be a positive integer of at most 2147483647 (ms, the longest timer Node.js honours), got `0` (number)"],
    // Past 2^31 - 1 ms Node fires a timer after 1 ms: a long timeout would become an immediate one.
    [() => forceRelease(clients, "lock:a", { nodeTimeoutMs: 2 ** 31 }), "Expected `nodeTimeoutMs` to be a positive integer of at most 2147483647"],
    [() => fencedWrite(clients[0]!, "stock", "1", { type: "del" }, { timeoutMs: 2 ** 31 }), "Expected `timeoutMs` to be a positive integer of at most 2147483647"],
    [() => acquireNaive({} as NaiveLockClient, "lock:a", 1000, { retryDelayMs: 2 ** 31 }), "Expected `retryDelayMs` to be a non-negative integer of at most 2147483647"],
    // A misspelt option would be dropped without a word: a forceRelease `token` given under another name
    // deleted whatever value the resource held, someone else's lock included.
    [() => forceRelease(clients, "lock:a", { value: "lk1:mine" } as never), "Unknown forceRelease option `value`: did you mean token?"],
    [() => forceRelease(clients, "lock:a", "lk1:mine" as never), "Expected `options` to be an object, got `\"lk1:mine\"` (string)"],
    [() => fencedWrite(clients[0]!, "stock", "1", { type: "del" }, { timeout: 50 } as never), "Unknown fencedWrite option `timeout`: did you mean timeoutMs?"],
    [() => acquireNaive({} as NaiveLockClient, "lock:a", 1000, { retryDelay: 5 } as never), "Unknown acquireNaive option `retryDelay`: did you mean retryDelayMs?"],
  ] as Array<[() => unknown, string]>)("%#", async (call, message) => {
    const error: unknown = await Promise.resolve()
      .then(call)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain(message);
  });

  it("checks settings and clients when the engine is made", () => {
    expect(() => new Redlock([])).toThrow("Expected `clients` to be a non-empty array of Redis clients, got `` (array)");
    expect(() => new Redlock([{} as RedlockClient])).toThrow(TypeError);
    expect(() => new Redlock([clients[0]!, clients[0]!])).toThrow("one per node");
    expect(() => new Redlock(clients, { driftFactor: 2 })).toThrow("Expected `driftFactor` to be a number from 0 to 0.5, got `2` (number)");
    expect(() => new Redlock(clients, { retryDelayMs: -1 })).toThrow("Expected `retryDelayMs` to be a non-negative integer of at most 2147483647 (ms, the longest timer Node.js honours), got `-1` (number)");
    expect(() => new Redlock(clients, { nodeTimeoutMs: 0 })).toThrow("Expected `nodeTimeoutMs` to be a positive integer");
    expect(() => new Redlock(clients, { label: 5 as unknown as string })).toThrow("Expected `label` to be a string or null, got `5` (number)");
  });

  it("refuses timer settings longer than Node.js can wait (a longer timer fires after 1 ms), and sleeps that long when asked", async () => {
    // nodeTimeoutMs 2^31 made every node a failed vote after 1 ms; a retry delay that long retried at once.
    for (const name of ["nodeTimeoutMs", "retryDelayMs", "retryJitterMs", "subscriberIdleMs"]) {
      expect(() => new Redlock(clients, { [name]: 2 ** 31 })).toThrow(`Expected \`${name}\` to be a`);
      expect(() => new Redlock(clients, { [name]: 2 ** 31 })).toThrow("integer of at most 2147483647 (ms, the longest timer Node.js honours), got `2147483648` (number)");
      expect(new Redlock(clients, { retryDelayMs: 0, retryJitterMs: 0, [name]: 2 ** 31 - 1 }).settings[name as "nodeTimeoutMs"]).toBe(2 ** 31 - 1);
    }
    expect(() => new Redlock(clients, { retryDelayMs: 2 ** 30, retryJitterMs: 2 ** 30 })).toThrow("Expected `retryDelayMs + retryJitterMs` to be a non-negative integer of at most 2147483647");
    vi.useFakeTimers();
    try {
      let done: boolean | null = null;
      void abortableSleep(2 ** 31 + 5).then((ranOut) => (done = ranOut));
      await vi.advanceTimersByTimeAsync(2 ** 31 - 1);
      expect(done).toBeNull();
      await vi.advanceTimersByTimeAsync(10);
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("refuses an unknown setting or option by name, with the nearest known name, instead of ignoring it", async () => {
    // node-redlock's names, and a typo: each would otherwise leave its default in force without a word.
    const unknown = (settings: object) => () => new Redlock(clients, settings);
    expect(unknown({ retryDelay: 50 })).toThrow(TypeError);
    expect(unknown({ retryDelay: 50 })).toThrow("Unknown setting `retryDelay`: did you mean retryDelayMs?");
    expect(unknown({ retryJitter: 10 })).toThrow("Unknown setting `retryJitter`: did you mean retryJitterMs?");
    expect(unknown({ automaticExtensionThreshold: 10 })).toThrow("did you mean automaticExtensionThresholdMs?");
    expect(unknown({ fenceed: true })).toThrow("Unknown setting `fenceed`: did you mean fenced?");
    const option = await Promise.resolve()
      .then(() => redlock.acquire(["lock:a"], 1000, { retryDelay: 5 } as never))
      .catch((e: unknown) => e);
    expect(option).toBeInstanceOf(TypeError);
    expect((option as Error).message).toContain("Unknown acquire option `retryDelay`: did you mean");
  });

  it("an acquisition whose signal had already aborted rejects with AcquireAbortedError, and sends nothing either", async () => {
    const reason = new Error("gave up before asking");
    const error: unknown = await redlock.acquire(["lock:a"], 1000, { signal: AbortSignal.abort(reason) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AcquireAbortedError);
    expect((error as AcquireAbortedError).cause).toBe(reason);
    expect((error as AcquireAbortedError).attempts).toBe(0);
  });

  it("release() and extend() of something that is not a lock reject (a `.catch()` sees it), naming the argument", async () => {
    for (const call of [() => redlock.release({} as never), () => redlock.extend({} as never, 1000)]) {
      const seen = await new Promise<unknown>((resolve) => {
        try {
          call().catch(resolve);
        } catch {
          resolve("thrown synchronously");
        }
      });
      expect(seen).toBeInstanceOf(TypeError);
      expect((seen as Error).message).toContain("Expected `lock` to be a Lock returned by acquire()");
    }
  });

  it("sent no command for any of them", () => {
    expect(calls).toEqual([]);
  });

  it("has frozen defaults", () => {
    expect(Object.isFrozen(DEFAULT_SETTINGS)).toBe(true);
    expect(DEFAULT_SETTINGS).toMatchObject({ driftFactor: 0.01, retryCount: 10, retryDelayMs: 200, retryJitterMs: 100, automaticExtensionThresholdMs: 500 });
    expect(redlock.settings.nodeTimeoutMs).toBe(200);
  });
});

describe("using() and the compat entry check their arguments before opening any connection", () => {
  // A node whose subscriber connection never finishes subscribing: a call that opened one first waited for it.
  const calls: string[] = [];
  const node = (): RedlockClient => ({
    ...fakeClient(calls),
    duplicate: (): SubscriberClient => {
      calls.push("duplicate");
      return {
        subscribe: (...channels) => {
          calls.push(`subscribe ${channels.join(" ")}`);
          return new Promise(() => {});
        },
        unsubscribe: () => Promise.resolve(),
        on: () => undefined,
        disconnect: () => {},
      };
    },
  });
  const nodes = [node(), node(), node()];
  const redlock = new Redlock(nodes);
  const compat = new CompatRedlock(nodes);

  it.each([
    [() => redlock.using([], 1000, () => 1), TypeError, "Expected `resources` to be a non-empty array of non-empty strings"],
    [() => redlock.using(["fence:a"], 1000, () => 1), TypeError, "Expected `resources` to be an array of resources named like none of the keys"],
    [() => redlock.using(["lock:a"], 1000, { retryCount: -5 }, () => 1), TypeError, "Expected `retryCount` to be a non-negative integer, got `-5` (number)"],
    [() => redlock.using(["lock:a"], 1000, { retryDelay: 5 } as never, () => 1), TypeError, "Unknown acquire option `retryDelay`"],
    [() => redlock.using(["lock:a"], 1000, { signal: AbortSignal.abort() }, () => 1), AcquireAbortedError, "aborted after 0 attempts"],
    [() => compat.acquire([], 1000), TypeError, "Expected `resources` to be a non-empty array of non-empty strings"],
    [() => compat.acquire(["lock:a"], -5), TypeError, "Expected `ttlMs` to be a positive integer, got `-5` (number)"],
    [() => compat.using(["lock:a", "lock:a"], 1000, () => Promise.resolve()), TypeError, "Expected `resources` to be an array without duplicates"],
    [() => compat.lock([], 1000), TypeError, "Expected `resources` to be a non-empty array of non-empty strings"],
  ] as Array<[() => Promise<unknown>, new (...args: never[]) => Error, string]>)("%#", async (call, type, message) => {
    const error: unknown = await Promise.resolve()
      .then(call)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toContain(message);
    expect(calls).toEqual([]);
  });
});
