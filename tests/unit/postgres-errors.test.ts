import { describe, expect, it } from "vitest";
import { isDatabaseUnreachable } from "@/server/postgres/errors";

const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("telling a database that did not answer from one that refused", () => {
  it("reads a server down, restarting, hung or out of connections as not answering", () => {
    for (const error of [
      coded("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"),
      coded("getaddrinfo ENOTFOUND db", "ENOTFOUND"),
      coded("terminating connection due to administrator command", "57P01"),
      coded("the database system is starting up", "57P03"),
      coded("sorry, too many clients already", "53300"),
      coded("connection failure", "08006"),
      new Error("Connection terminated unexpectedly"),
      new Error("Connection terminated due to connection timeout", { cause: new Error("Connection terminated") }),
      new Error("timeout exceeded when trying to connect"),
      new Error("Query read timeout"),
      new AggregateError([coded("connect ECONNREFUSED ::1:5432", "ECONNREFUSED"), coded("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED")], ""),
    ]) {
      expect(isDatabaseUnreachable(error), error.message).toBe(true);
    }
  });

  it("reads an answer that refuses the statement as a refusal", () => {
    for (const error of [
      coded('relation "lock_events" does not exist', "42P01"),
      coded('null value in column "deployment" violates not-null constraint', "23502"),
      coded("permission denied for table lock_events", "42501"),
      coded("canceling statement due to statement timeout", "57014"),
      new Error("migration 4 (holds by deployment) failed: permission denied for table lock_holds"),
      "a string",
      null,
    ]) {
      expect(isDatabaseUnreachable(error), String(error)).toBe(false);
    }
  });
});
