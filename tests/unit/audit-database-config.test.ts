import { describe, expect, it } from "vitest";
import { ConfigError, maskDatabaseUrl, parseConfig } from "@/lib/config";

describe("AUDIT_DATABASE_URL and HISTORY_RETENTION_DAYS", () => {
  it("takes a postgres:// URL with a database, and defaults to none and 30 days", () => {
    expect(parseConfig({})).toMatchObject({ auditDatabaseUrl: null, historyRetentionDays: 30 });
    const config = parseConfig({ AUDIT_DATABASE_URL: "postgresql://lockscope:s3cret@db:5432/lockscope", HISTORY_RETENTION_DAYS: "7" });
    expect(config).toMatchObject({ auditDatabaseUrl: "postgresql://lockscope:s3cret@db:5432/lockscope", historyRetentionDays: 7 });
  });

  it("names a wrong URL with its password masked", () => {
    let error: unknown;
    try {
      parseConfig({ AUDIT_DATABASE_URL: "mysql://lockscope:s3cret@db:3306/lockscope" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain("AUDIT_DATABASE_URL");
    expect((error as Error).message).not.toContain("s3cret");
    expect(() => parseConfig({ AUDIT_DATABASE_URL: "postgres://db:5432" })).toThrow(/database name/);
    expect(() => parseConfig({ HISTORY_RETENTION_DAYS: "0" })).toThrow(/HISTORY_RETENTION_DAYS/);
  });

  it("masks the password wherever the URL is shown", () => {
    expect(maskDatabaseUrl("postgres://lockscope:s3cret@db:5432/lockscope?sslmode=require")).toBe("postgres://lockscope:****@db:5432/lockscope?sslmode=require");
    expect(maskDatabaseUrl("postgres://db/lockscope")).toBe("postgres://db/lockscope");
    // node-postgres takes the password (and the client key's passphrase) from the query string too.
    const shown = maskDatabaseUrl("postgres://lockscope@db:5432/lockscope?password=s3cret&sslmode=require&sslpassword=k3y");
    expect(shown).not.toMatch(/s3cret|k3y/);
    expect(shown).toBe("postgres://lockscope@db:5432/lockscope?password=****&sslmode=require&sslpassword=****");
    // A URL refused at start is named without it either.
    let error: unknown;
    try {
      parseConfig({ AUDIT_DATABASE_URL: "postgres://db:5432?password=s3cret" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/AUDIT_DATABASE_URL=/);
    expect((error as Error).message).not.toContain("s3cret");
    // The PostgreSQL client also takes the password from the query.
    expect(maskDatabaseUrl("postgres://lockscope@db/lockscope?password=s3cret&sslmode=verify-full")).toBe("postgres://lockscope@db/lockscope?password=****&sslmode=verify-full");
    expect(maskDatabaseUrl("postgres://lockscope@db/lockscope?sslpassword=s3cret")).not.toContain("s3cret");
  });

  it("masks a password given in the query of a wrong URL", () => {
    for (const url of ["postgres://lockscope@db?password=s3cret", "mysql://lockscope@db/lockscope?password=s3cret"]) {
      expect(() => parseConfig({ AUDIT_DATABASE_URL: url })).toThrow(ConfigError);
      expect(() => parseConfig({ AUDIT_DATABASE_URL: url })).not.toThrow(/s3cret/);
    }
  });
});
