import "server-only";
import { z } from "zod";

/** Query fields shared by the paged lock list, the groups and the group-filtered stream. */

export const groupName = z.string().min(1, "must not be empty").max(200, "must be at most 200 characters");
export const search = z.string().max(200, "must be at most 200 characters");
export const order = z.enum(["asc", "desc"], { error: "must be asc or desc" });
export const offset = z.coerce
  .number({ error: "must be a whole number" })
  .int("must be a whole number")
  .min(0, "must be at least 0")
  .max(10_000_000, "must be at most 10000000");

/** A deployment's name, as the deployments file allows them (an unknown one is refused with the names watched). */
export const deploymentName = z
  .string()
  .min(1, "must not be empty")
  .max(40, "must be at most 40 characters")
  .regex(/^[a-z0-9-]+$/, "must be a deployment's name: lower-case letters, digits or '-'");
