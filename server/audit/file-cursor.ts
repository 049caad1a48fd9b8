import "server-only";
import { open, type FileHandle } from "node:fs/promises";
import { auditIdTime, parseAuditRecord, type AuditRecord } from "./records";

/** Bytes read from the file per step, walking backwards. */
const CHUNK_BYTES = 64 * 1024;

/**
 * Reads the audit file from its end towards its start, a chunk at a time, for one page request: what a
 * page needs is near the end (newest first), and nothing of the file stays in memory between requests.
 * Only whole lines count: a record being appended right now (no newline yet) is left for the next read.
 *
 * This is the read side only; how records are written is `AuditLog.appendToFile`'s business. A line is
 * handed to `parseAuditRecord`, which decides what a record looks like.
 */
export class AuditFileCursor {
  /**
   * The oldest intent time (ms, from its id) read so far; Infinity before the first. Records further back were
   * written before every record read, so their intents are older than this (give or take the moment between an id
   * and its line). Outcomes do not count: one is written at the end of its release, and one retried until the store
   * took it long after, so its id (its intent's) says nothing of where it lies in the file.
   */
  lowMs = Infinity;
  done = false;
  /** Records read so far at or below the bound `next` was given (those newer are skipped, and not counted). */
  read = 0;
  /** Lines read so far that are no record (torn by a crash or a full disk): skipped, and reported by the log. */
  unreadable = 0;
  private carry: Buffer = Buffer.alloc(0);
  private first = true;

  private constructor(
    private readonly handle: FileHandle,
    private pos: number,
  ) {
    if (pos === 0) this.done = true;
  }

  /** Opens `file`; null when it does not exist yet. Other errors are thrown as they come (the caller names them). */
  static async open(file: string): Promise<AuditFileCursor | null> {
    let handle: FileHandle;
    try {
      handle = await open(file, "r");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new Error("not a regular file");
      return new AuditFileCursor(handle, stat.size);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * The next records walking backwards (newest first), at least one chunk's worth unless the start is
   * reached. Records whose id is later than `maxMs` are skipped (a page that starts further back).
   */
  async next(maxMs = Infinity): Promise<AuditRecord[]> {
    const out: AuditRecord[] = [];
    while (!this.done && out.length === 0) {
      const start = Math.max(0, this.pos - CHUNK_BYTES);
      const chunk = Buffer.alloc(this.pos - start);
      const { bytesRead } = await this.handle.read(chunk, 0, chunk.length, start);
      this.pos = start;
      const data = Buffer.concat([chunk.subarray(0, bytesRead), this.carry]);
      let end = data.length;
      if (this.first) {
        // What follows the last newline is a record still being written.
        end = data.lastIndexOf(0x0a) + 1;
        this.first = false;
      }
      // The part before the first newline may be the end of a line that starts in an earlier chunk.
      const firstNewline = start === 0 ? -1 : data.indexOf(0x0a);
      if (start > 0 && (firstNewline < 0 || firstNewline >= end)) {
        this.carry = data.subarray(0, end);
        continue;
      }
      this.carry = start === 0 ? Buffer.alloc(0) : data.subarray(0, firstNewline);
      const body = data.subarray(start === 0 ? 0 : firstNewline + 1, end);
      const lines = body.toString("utf8").split("\n");
      for (let i = lines.length - 1; i >= 0; i--) {
        const line = lines[i] ?? "";
        if (line.trim() === "") continue;
        const record = parseAuditRecord(line);
        if (!record) {
          this.unreadable += 1;
          continue;
        }
        const at = auditIdTime(record.id);
        if (record.kind === "intent" && at < this.lowMs) this.lowMs = at;
        if (at > maxMs) continue;
        this.read += 1;
        out.push(record);
      }
      if (start === 0) this.done = true;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
