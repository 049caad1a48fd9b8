import { describe, expect, it } from "vitest";
import { nodeFailureText } from "@/server/errors";

describe("a lock node's failure in words an operator can act on", () => {
  it("tells a wrong password from an ACL that refuses the command or the key", () => {
    expect(nodeFailureText("WRONGPASS invalid username-password pair or user is disabled.")).toBe("refused the console's credentials");
    expect(nodeFailureText("NOAUTH Authentication required.")).toBe("refused the console's credentials");
    // The credentials were accepted: the user's ACL rules leave out this command or key (Redis 7.0 and 7.2+ words).
    for (const raw of [
      "NOPERM this user has no permissions to run the 'eval' command",
      "NOPERM this user has no permissions to access one of the keys used as arguments",
      "NOPERM No permissions to access a key",
      "ERR ACL failure in script: No permissions to access a key script: 1234, on @user_script:1.",
    ]) {
      expect([raw, nodeFailureText(raw)]).toEqual([raw, "refused by its ACL: the console's Redis user may not run this command or use this key there"]);
    }
  });

  it("says a node is a read-only replica, as Redis words it for a command and inside a script", () => {
    for (const raw of [
      "READONLY You can't write against a read only replica.",
      "READONLY You can't write against a read only replica. script: 1234, on @user_script:1.",
    ]) {
      expect([raw, nodeFailureText(raw)]).toEqual([raw, "is a read-only replica now, demoted by a failover or named so by its URL: nothing was written there"]);
    }
  });
});
