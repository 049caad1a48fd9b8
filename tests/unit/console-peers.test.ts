import { describe, expect, it } from "vitest";
import { forgottenEntries, parseBeat, PEER_FORGET_MS, peerWarnings, PEER_STALE_MS, type ConsoleBeat } from "@/lib/console-peers";

const now = 1_700_000_000_000;
const beat = (id: string, secret: string, generated = false, at = now): ConsoleBeat => ({ id, name: id.split("/")[0]!, secret, generated, at });

describe("what a console concludes from the other consoles' beats", () => {
  it("says nothing when every console signs with the same configured key", () => {
    const self = beat("a:3000/1", "fp1");
    expect(peerWarnings(self, [self, beat("b:3000/2", "fp1")], now)).toEqual({ peers: [beat("b:3000/2", "fp1")], warnings: [] });
  });

  it("names a console that signs with another key, and a generated key while others run", () => {
    const self = beat("a:3000/1", "fp1", true);
    const { warnings } = peerWarnings(self, [self, beat("b:3000/2", "fp2")], now);
    expect(warnings.map((w) => w.key)).toEqual(["mismatch:b:3000/2", "generated"]);
    expect(warnings[0]!.message).toContain("console b:3000 signs sessions with a different key");
    expect(warnings[0]!.message).toContain("LOCKSCOPE_SESSION_SECRET");
    expect(warnings[1]!.message).toContain("generated");
  });

  it("ignores stale entries and itself, and a generated key alone is fine", () => {
    const self = beat("a:3000/1", "fp1", true);
    expect(peerWarnings(self, [self, beat("b:3000/2", "fp2", false, now - PEER_STALE_MS)], now).warnings).toEqual([]);
  });

  it("refuses malformed entries", () => {
    expect(parseBeat("{")).toBeNull();
    expect(parseBeat(JSON.stringify({ id: "x" }))).toBeNull();
    expect(parseBeat(JSON.stringify(beat("a/1", "f")))).toEqual(beat("a/1", "f"));
  });

  it("forgets the entries of consoles gone for longer than PEER_FORGET_MS, and none it cannot read", () => {
    const entries = {
      "gone:3000/1": JSON.stringify(beat("gone:3000/1", "fp1", false, now - PEER_FORGET_MS - 1)),
      "recent:3000/2": JSON.stringify(beat("recent:3000/2", "fp1", false, now - PEER_STALE_MS * 4)),
      "later-version:3000/3": JSON.stringify({ id: "later-version:3000/3", at: 0 }),
    };
    expect(forgottenEntries(entries, now)).toEqual(["gone:3000/1"]);
  });

  it("names a console with the same key that takes other tokens, and says nothing of a console that does not say", () => {
    const self: ConsoleBeat = { ...beat("a:3000/1", "fp1"), operator: "op1", viewer: "none" };
    const otherOperator: ConsoleBeat = { ...beat("b:3000/2", "fp1"), operator: "op2", viewer: "none" };
    const asksViewer: ConsoleBeat = { ...beat("c:3000/3", "fp1"), operator: "op1", viewer: "v1" };
    const earlierVersion = beat("d:3000/4", "fp1");
    const { warnings } = peerWarnings(self, [self, otherOperator, asksViewer, earlierVersion], now);
    expect(warnings.map((w) => w.key)).toEqual(["operator:b:3000/2", "viewer:c:3000/3"]);
    expect(warnings[0]!.message).toContain("console b:3000 takes a different operator token");
    expect(warnings[0]!.message).toContain("LOCKSCOPE_OPERATOR_TOKEN");
    expect(warnings[1]!.message).toContain("console c:3000 asks for a viewer token, and this one lets anyone read without one");
    expect(warnings[1]!.message).toContain("LOCKSCOPE_VIEWER_TOKEN");
    // Under another key the tokens' fingerprints cannot be compared: the key is what is said.
    const otherKey: ConsoleBeat = { ...beat("e:3000/5", "fp2"), operator: "op2", viewer: "v2" };
    expect(peerWarnings(self, [otherKey], now).warnings.map((w) => w.key)).toEqual(["mismatch:e:3000/5"]);
    expect(parseBeat(JSON.stringify(otherKey))).toEqual(otherKey);
  });
});
