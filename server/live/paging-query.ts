import "server-only";
import { z } from "zod";
import { queryText } from "../query-text";

/** Query fields shared by the paged lock list, the groups and the group-filtered stream. */

export const groupName = queryText("a group's name (GET /api/locks/groups lists them)").max(200, "must be at most 200 characters");
export const search = queryText("the text to look for").max(200, "must be at most 200 characters");
export const order = queryText("asc or desc").pipe(z.enum(["asc", "desc"], { error: "must be asc or desc" }));
/**
 * A whole number in a query string, written in decimal digits only (`0x10`, `1e3`, `+5` and ` 5` are refused,
 * as everywhere in the API), from `min` to `max`.
 */
export const wholeNumber = (min: number, max: number) =>
  queryText(`a whole number from ${min} to ${max}`)
    .regex(/^[0-9]{1,10}$/, "must be a whole number, in decimal digits")
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

export const offset = wholeNumber(0, 10_000_000);

/** A deployment's name, as the deployments file allows them (an unknown one is refused with the names watched). */
export const deploymentName = queryText("a deployment's name")
  .max(40, "must be at most 40 characters")
  .regex(/^[a-z0-9-]+$/, "must be a deployment's name: lower-case letters, digits or '-'");
