import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { groupBackHref, groupHref, rememberGroupAddress } from "@/components/locks/format";

/** A tab's session storage, as the browser gives it (Node has none). */
function tabStorage(): Storage {
  const items = new Map<string, string>();
  return {
    get length() {
      return items.size;
    },
    clear: () => items.clear(),
    getItem: (key) => items.get(key) ?? null,
    key: (i) => [...items.keys()][i] ?? null,
    removeItem: (key) => void items.delete(key),
    setItem: (key, value) => void items.set(key, String(value)),
  };
}

describe("the way back from a lock's page to its group", () => {
  let storage: Storage;
  beforeEach(() => {
    storage = tabStorage();
    vi.stubGlobal("window", { sessionStorage: storage });
  });
  afterEach(() => vi.unstubAllGlobals());

  const searched = groupHref("lock:orders", "", "lock:", { search: "job-00", sort: { key: "ttl", dir: -1 } });

  it("leads to the group's table as the tab showed it: its filter, search and sort", () => {
    rememberGroupAddress(searched);
    expect(groupBackHref("lock:orders", "default")).toBe("/?group=lock%3Aorders&filter=lock%3A&q=job-00&sort=ttl&order=desc");
  });

  it("leads to the group's own address when the tab showed another group last, or nothing", () => {
    expect(groupBackHref("lock:orders", "default")).toBe("/?group=lock%3Aorders");
    rememberGroupAddress(groupHref("lock:mail", "", "", { search: "x", sort: { key: "resource", dir: 1 } }));
    expect(groupBackHref("lock:orders", "default")).toBe("/?group=lock%3Aorders");
  });

  it("keeps a table of the lock's own deployment, and not one of another deployment", () => {
    rememberGroupAddress(groupHref("lock:orders", "eu", "", { search: "job", sort: { key: "resource", dir: 1 } }));
    expect(groupBackHref("lock:orders", "eu")).toBe("/?group=lock%3Aorders&deployment=eu&q=job");
    expect(groupBackHref("lock:orders", "us")).toBe("/?group=lock%3Aorders");
  });

  it("never leads off the console's groups page, whatever the storage holds", () => {
    for (const held of [
      "//evil.example/?group=lock%3Aorders",
      "https://evil.example/?group=lock%3Aorders",
      "/audit?group=lock%3Aorders",
      "/?group=lock%3Amail",
      "/?group=lock%3Aorders%2Fx",
      "not an address",
    ]) {
      storage.setItem("lockscope.group-address", held);
      expect(groupBackHref("lock:orders", "default"), held).toBe("/?group=lock%3Aorders");
    }
  });

  it("works without storage (refused or absent): nothing kept, the group's own address", () => {
    vi.stubGlobal("window", {
      get sessionStorage(): Storage {
        throw new DOMException("The operation is insecure.", "SecurityError");
      },
    });
    expect(() => rememberGroupAddress(searched)).not.toThrow();
    expect(groupBackHref("lock:orders", "default")).toBe("/?group=lock%3Aorders");
  });
});
