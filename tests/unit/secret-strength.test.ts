import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { weakSecretProblem } from "@/lib/secret-strength";

describe("a chosen session secret's strength", () => {
  it("takes 32 random bytes however they are written, every time", () => {
    for (let i = 0; i < 2_000; i++) {
      const bytes = randomBytes(32);
      for (const encoding of ["base64", "base64url", "hex"] as const) expect(weakSecretProblem(bytes.toString(encoding)), encoding).toBeNull();
    }
  });

  it("refuses fewer random bytes, words and patterns", () => {
    expect(weakSecretProblem(randomBytes(16).toString("hex"))).toMatch(/vary too little/);
    expect(weakSecretProblem(randomBytes(16).toString("base64"))).toBe("it is 24 characters long");
    expect(weakSecretProblem("a".repeat(64))).toMatch(/vary too little/);
    expect(weakSecretProblem("correct-horse-battery-staple-2024")).toMatch(/vary too little/);
  });
});
