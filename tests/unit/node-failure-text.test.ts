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

  it("names the command a node does not know (renamed or disabled, as managed services do), never the arguments Redis repeats", () => {
    for (const raw of [
      "ERR unknown command 'xadd', with args beginning with: 'lockscope:audit' 'MAXLEN' '~' '100000' '*' 'r' '{\"token\":\"lk1:secret-holder\"}' ",
      "ERR unknown command `xadd`, with args beginning with: `lockscope:audit`, `MAXLEN`, ",
      "ERR unknown command 'XADD'",
      "Too many Cluster redirections. Last error: ReplyError: ERR unknown command 'xadd', with args beginning with: 'lockscope:audit' ",
    ]) {
      expect([raw, nodeFailureText(raw)]).toEqual([raw, "does not know the command `XADD` (renamed or disabled there, as some managed services do), so it did not run there"]);
    }
    // A name that is not a plain command name is not echoed either.
    expect(nodeFailureText("ERR unknown command 'a b<script>', with args beginning with: 'secret' ")).toBe(
      "does not know a command the console sent (renamed or disabled there, as some managed services do), so it did not run there",
    );
    expect(nodeFailureText("ERR unknown command 'evalsha', with args beginning with: 'abc' '1' 'lock:x' 'lk1:secret-holder' ")).not.toContain("secret");
  });
});
