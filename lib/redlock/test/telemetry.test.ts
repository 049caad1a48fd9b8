import { describe, expect, it } from "vitest";
import { encodeLockValue, lockValueId, parseContentionMessage, parseGaveUpMessage, parseReleaseMessage, parseRevokeMessage, parseWakeMessage } from "../index.ts";

describe("telemetry messages", () => {
  const value = encodeLockValue({ label: "lab", host: "box", pid: 7, fence: null, acquiredAt: 1000 });

  it("parses a contention message into resource, waiter identity and attempt", () => {
    const event = parseContentionMessage(`c1|3|1760000000000|${value}|lock:orders/42|x`);
    expect(event).toEqual({
      resource: "lock:orders/42|x",
      waiterId: lockValueId(value),
      label: "lab",
      host: "box",
      pid: 7,
      attempt: 3,
      at: 1760000000000,
    });
  });

  it.each(["", "c1|x|1|v|r", `c2|1|1|${value}|r`, `c1|1|1|${value}|`, "c1|1|1|deadbeef|lock:a", "hello"])(
    "rejects %j",
    (raw) => expect(parseContentionMessage(raw)).toBeNull(),
  );

  it("parses a waiter's give-up into resource and waiter id, and nothing else as one", () => {
    expect(parseGaveUpMessage(`l1|${value}|lock:orders/42|x`)).toEqual({ resource: "lock:orders/42|x", waiterId: lockValueId(value) });
    for (const raw of [`l1|${value}|`, "l1|deadbeef|lock:a", `l2|${value}|lock:a`, `c1|1|1|${value}|lock:a`, "l1|"]) expect(parseGaveUpMessage(raw), raw).toBeNull();
    // A consumer that knows only refusals ignores it.
    expect(parseContentionMessage(`l1|${value}|lock:a`)).toBeNull();
  });

  it("parses release and revocation messages", () => {
    expect(parseReleaseMessage("r1||lock:a|b")).toEqual({ resource: "lock:a|b", nextWaiterId: null });
    expect(parseReleaseMessage("r1|abc|lock:a")).toEqual({ resource: "lock:a", nextWaiterId: "abc" });
    expect(parseReleaseMessage("r1|abc|")).toBeNull();
    expect(parseRevokeMessage(JSON.stringify({ v: 1, resource: "lock:a", value: "x" }))).toEqual({ resource: "lock:a", value: "x" });
    expect(parseRevokeMessage("{")).toBeNull();
    expect(parseRevokeMessage('{"v":2}')).toBeNull();
  });

  it("parses wake channel messages: a wake-up, or a lock written in the waiter's value", () => {
    expect(parseWakeMessage("r1|abc|lock:a")).toEqual({ kind: "wake", resource: "lock:a", nextWaiterId: "abc" });
    expect(parseWakeMessage("g1|abc|3|17|lock:a|b")).toEqual({ kind: "grant", resource: "lock:a|b", nextWaiterId: "abc", attempt: 3, fence: "17" });
    expect(parseWakeMessage("g1|abc|1||lock:a")).toEqual({ kind: "grant", resource: "lock:a", nextWaiterId: "abc", attempt: 1, fence: "" });
    expect(parseWakeMessage(`v1|${value}|lock:a|b`)).toEqual({ kind: "revoke", resource: "lock:a|b", value });
    for (const raw of [`v1|${value}|`, "v1|not-an-engine-value|lock:a", "v2|x|lock:a"]) expect(parseWakeMessage(raw), raw).toBeNull();
    // No waiter, no attempt, a fence that is not a number, no resource: not a grant.
    for (const raw of ["g1||1||lock:a", "g1|abc|0||lock:a", "g1|abc|x||lock:a", "g1|abc|1|1e3|lock:a", "g1|abc|1||", "g2|abc|1||lock:a"]) {
      expect(parseWakeMessage(raw), raw).toBeNull();
    }
  });
});
