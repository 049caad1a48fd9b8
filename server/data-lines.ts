import "server-only";
import { readFileSync } from "node:fs";

/** The lines of a JSON-lines file kept in the data folder, blank ones left out; none while it does not exist. */
export function readDataLines(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return []; // none yet
  }
  return text.split("\n").filter(Boolean);
}
