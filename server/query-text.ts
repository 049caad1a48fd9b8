import "server-only";
import { z } from "zod";

/**
 * A query parameter's text, refused when it is empty (`?resource=`) with what to give instead; the field's
 * own checks (a pattern, a range, a list of choices) follow with `.regex`, `.max` or `.pipe` and are not run on
 * an empty value, so it gets this one message, never zod's own "Too small: expected string to have >=1
 * characters". The route wrapper names the parameter before it (`Invalid query: resource: must not be empty…`).
 */
export const queryText = (give: string) => z.string().min(1, { message: `must not be empty: give ${give}, or leave it out`, abort: true });
