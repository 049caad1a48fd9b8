import { describe, expect, it } from "vitest";
import { isAccessRefused, isScriptRefused } from "@/lib/locks/formats";

/** Redis 7.0's own error texts, as an ACL user meets them. */
const replyError = (message: string) => Object.assign(new Error(message), { name: "ReplyError" });
const SCRIPT_COMMAND = replyError("NOPERM this user has no permissions to run the 'evalsha' command");
const KEY = replyError("NOPERM this user has no permissions to access one of the keys used as arguments");
const CHANNEL = replyError("NOPERM this user has no permissions to access one of the channels used as arguments");
const KEY_IN_SCRIPT = replyError("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: e6f7c6d717af2983fa3102a112787a272b2d2888, on @user_script:1.");

/** The same refusals in Redis 7.2 and later (and Valkey): the key or channel named, or not. */
const SCRIPT_COMMAND_72 = replyError("NOPERM User lockscope has no permissions to run the 'evalsha' command");
const KEY_72 = replyError("NOPERM No permissions to access a key");
const CHANNEL_72 = replyError("NOPERM No permissions to access a channel");
const KEY_IN_SCRIPT_72 = replyError("ERR ACL failure in script: No permissions to access a key script: e6f7c6d717af2983fa3102a112787a272b2d2888, on @user_script:1.");
const KEY_IN_SCRIPT_NAMED = replyError("ERR ACL failure in script: User lockscope has no permissions to access the 'orders:1' key script: e6f7c6d717af2983fa3102a112787a272b2d2888, on @user_script:1.");

describe("telling a refused script from a refused key", () => {
  it("reads a node that refuses scripts without them, but not one that refuses the keys", () => {
    expect(isScriptRefused(SCRIPT_COMMAND)).toBe(true);
    expect(isScriptRefused(replyError("ERR unknown command 'evalsha', with args beginning with: "))).toBe(true);
    // Reading the same keys without a script is refused too: the user lacks the keys, not the command.
    expect(isScriptRefused(KEY)).toBe(false);
    expect(isScriptRefused(KEY_IN_SCRIPT)).toBe(false);
  });

  it("takes a key or channel the ACL user may not touch for an access refusal, and nothing else", () => {
    expect([KEY, CHANNEL, KEY_IN_SCRIPT].map(isAccessRefused)).toEqual([true, true, true]);
    expect(isAccessRefused(SCRIPT_COMMAND)).toBe(false);
    expect(isAccessRefused(replyError("WRONGPASS invalid username-password pair or user is disabled."))).toBe(false);
  });

  it("tells them apart in the texts of Redis 7.2 and later too", () => {
    expect(isScriptRefused(SCRIPT_COMMAND_72)).toBe(true);
    expect([KEY_72, CHANNEL_72, KEY_IN_SCRIPT_72, KEY_IN_SCRIPT_NAMED].map(isScriptRefused)).toEqual([false, false, false, false]);
    expect([KEY_72, CHANNEL_72, KEY_IN_SCRIPT_72, KEY_IN_SCRIPT_NAMED].map(isAccessRefused)).toEqual([true, true, true, true]);
    expect(isAccessRefused(SCRIPT_COMMAND_72)).toBe(false);
  });
});
