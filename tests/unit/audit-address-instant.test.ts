import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { addressInstant } from "@/server/audit/query";

describe("the Audit page's time filters kept in its address", () => {
  const zone = process.env.TZ;
  // The console's own time zone is not the reader's: a server far from UTC shows whether it leaks in.
  beforeEach(() => {
    process.env.TZ = "America/New_York";
  });
  afterEach(() => {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  });

  it("reads what the API reads, as the same instant", () => {
    expect(addressInstant("2025-01-31")).toBe("2025-01-31T00:00:00.000Z");
    expect(addressInstant("2025-01-31T12:00:00Z")).toBe("2025-01-31T12:00:00.000Z");
    expect(addressInstant("2025-01-31T12:00:00+02:00")).toBe("2025-01-31T10:00:00.000Z");
    expect(addressInstant("1738324800000")).toBe("2025-01-31T12:00:00.000Z");
    expect(addressInstant(undefined)).toBe("");
    expect(addressInstant(["2025-01-31", "2025-02-01"])).toBe("");
  });

  it("applies no filter the API would refuse, rather than one read in the server's time zone or on another day", () => {
    // No zone: the API refuses it; read here, it would be New York time.
    expect(addressInstant("2025-01-31T12:00")).toBe("");
    expect(addressInstant("2025-01-31 12:00:00")).toBe("");
    expect(addressInstant("Jan 31 2025")).toBe("");
    // A day that does not exist: the API refuses it; Date.parse makes it 2 March.
    expect(addressInstant("2025-02-30")).toBe("");
    expect(addressInstant("2025-01-31 (hello)")).toBe("");
  });
});
