import "server-only";
import { readFileSync } from "node:fs";
import { tightenDataFile } from "./data-file-mode";

/** The lines of a JSON-lines file kept in the data folder, blank ones left out; none while it does not exist. */
export function readDataLines(file: string): string[] {
  tightenDataFile(file);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return []; // none yet
  }
  return text.split("\n").filter(Boolean);
}
