import { describe, expect, it } from "vitest";
import { replicationWarning } from "@/lib/locks/release-text";

describe("the warning after a force release that replicas have not copied", () => {
  it("says nothing where there is no replica or every replica has the release", () => {
    expect(replicationWarning(undefined)).toBeNull();
    expect(replicationWarning({ primary: "10.0.0.1:6379", replicas: [] })).toBeNull();
    expect(replicationWarning({ primary: "10.0.0.1:6379", replicas: [{ address: "10.0.0.2:6379", hasRelease: true }] })).toBeNull();
  });

  it("names the replicas without it and says a failover to one brings the lock back", () => {
    expect(replicationWarning({ primary: "p:1", replicas: [{ address: "r:2", hasRelease: false }] })).toBe(
      "The replica (r:2) had not copied the release within 1.2 s: if it is promoted before it does, the lock is back, held by the same holder. Watch the lock's page if a failover is under way.",
    );
    expect(
      replicationWarning({
        primary: "p:1",
        replicas: [
          { address: "r:2", hasRelease: false },
          { address: "r:3", hasRelease: true },
        ],
      }),
    ).toMatch(/^1 of the 2 replicas \(r:2\) had not copied the release within 1\.2 s: if it is promoted/);
    expect(
      replicationWarning({
        primary: "p:1",
        replicas: [
          { address: "r:2", hasRelease: false },
          { address: "r:3", hasRelease: false },
        ],
      }),
    ).toBe(
      "None of the 2 replicas (r:2, r:3) had copied the release within 1.2 s: if one of them is promoted before it does, the lock is back, held by the same holder. Watch the lock's page if a failover is under way.",
    );
  });
});
