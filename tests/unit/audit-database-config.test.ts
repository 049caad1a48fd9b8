import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
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

describe("AUDIT_DATABASE_URL's TLS settings, checked at start", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-db-tls-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const ca = path.join(dir, "db-ca.pem");
  writeFileSync(ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  const notPem = path.join(dir, "db-ca.der");
  writeFileSync(notPem, "\u0030\u0082binary");
  const readFile = (file: string) => readFileSync(file, "utf8");
  const base = "postgres://lockscope:s3cret@db:5432/lockscope";
  const messageOf = (url: string): string => {
    try {
      parseConfig({ AUDIT_DATABASE_URL: url }, { readFile });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe("AUDIT_DATABASE_URL");
      return (error as Error).message;
    }
    throw new Error(`expected ${url} to be refused`);
  };

  it("takes a verified TLS connection, with the CA file it names, and plain TCP when asked for", () => {
    for (const url of [`${base}?sslmode=verify-full`, `${base}?sslmode=verify-full&sslrootcert=${ca}`, `${base}?sslmode=require`, `${base}?sslmode=disable`, base]) {
      expect(parseConfig({ AUDIT_DATABASE_URL: url }, { readFile }).auditDatabaseUrl).toBe(url);
    }
  });

  it("refuses a mode that does not check the server's certificate, which the README promises is always checked", () => {
    for (const url of [`${base}?sslmode=no-verify`, `${base}?uselibpqcompat=true&sslmode=require`, `${base}?sslmode=prefer&uselibpqcompat=true`]) {
      const message = messageOf(url);
      expect(message, url).toMatch(/does not check the server's certificate/);
      expect(message, url).toContain("sslmode=verify-full");
      expect(message).not.toContain("s3cret");
    }
  });

  it("refuses a mode that is none, naming it", () => {
    expect(messageOf(`${base}?sslmode=verify_full`)).toMatch(/sslmode=verify_full is not a mode: expected verify-full/);
  });

  it("refuses a certificate file it cannot read or that holds no PEM block, naming the parameter and the file", () => {
    const missing = path.join(dir, "nowhere.pem");
    expect(messageOf(`${base}?sslmode=verify-full&sslrootcert=${missing}`)).toContain(`sslrootcert=${JSON.stringify(missing)} cannot be read (ENOENT)`);
    expect(messageOf(`${base}?sslrootcert=${notPem}`)).toContain(`sslrootcert=${JSON.stringify(notPem)} holds no PEM block`);
    expect(messageOf(`${base}?sslmode=verify-full&sslcert=${ca}`)).toMatch(/a client certificate needs both sslcert and sslkey/);
  });
});
