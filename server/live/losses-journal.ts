import "server-only";
import { appendFileSync, chmodSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { makeDirs } from "@/lib/make-dirs";
import type { LockLoss } from "@/lib/locks/types";
import { readDataLines } from "../data-lines";
import { LOSSES_KEPT_MS, MAX_LOSSES } from "./store";

type Loss = Omit<LockLoss, "deployment">;

const line = z.object({
  deployment: z.string(),
  at: z.number().finite(),
  resource: z.string(),
  node: z.string(),
  kind: z.enum(["restart", "failover"]),
  detail: z.string(),
  token: z.string(),
  wentOn: z.boolean(),
});

/** Written this long after the first loss of a burst: a restart that loses a million locks writes once. */
const FLUSH_AFTER_MS = 200;

/**
 * The losses list (`GET /api/losses`, the losses panel) kept in the data folder, so that a console restarted
 * (a deploy, a crash beside the node it watched) still lists the last day's losses: the page an on-call engineer
 * opens after `LockscopeLocksLostInRestart` fired. One JSON line per loss; a deployment keeps its newest
 * `MAX_LOSSES` within `LOSSES_KEPT_MS`, as the live list does. Losses are written in bursts, after
 * `FLUSH_AFTER_MS` and at shutdown; the file is rewritten with what is kept once it holds a few times that.
 */
export class LossJournal {
  /** Per deployment, the newest losses kept (oldest first), as the file would be rewritten. */
  private readonly kept = new Map<string, Loss[]>();
  /** Per deployment, the losses not written yet (oldest first). */
  private pending = new Map<string, Loss[]>();
  private linesInFile = 0;
  private timer: NodeJS.Timeout | null = null;
  private loaded = false;
  private warned = false;

  constructor(
    private readonly file: string | null,
    private readonly warn: (error: string) => void = () => {},
  ) {}

  /** The losses of `deployment` kept from earlier runs, oldest first (read once for every deployment). */
  restore(deployment: string, now = Date.now()): Loss[] {
    this.load(now);
    return (this.kept.get(deployment) ?? []).filter((loss) => now - loss.at <= LOSSES_KEPT_MS);
  }

  record(deployment: string, loss: Loss): void {
    if (this.file === null) return;
    pushBounded(this.kept, deployment, loss);
    pushBounded(this.pending, deployment, loss);
    this.timer ??= setTimeout(() => this.flush(), FLUSH_AFTER_MS);
    this.timer.unref?.();
  }

  /** Writes what is pending (at shutdown, and `FLUSH_AFTER_MS` after a burst began). Never throws. */
  flush(now = Date.now()): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.file === null || this.pending.size === 0) return;
    const pending = this.pending;
    this.pending = new Map();
    let count = 0;
    for (const losses of pending.values()) count += Math.min(losses.length, MAX_LOSSES);
    try {
      makeDirs(path.dirname(this.file), 0o700);
      if (this.linesInFile + count > 3 * MAX_LOSSES * Math.max(1, this.kept.size)) this.rewrite(now);
      else {
        appendFileSync(this.file, lines(pending), { mode: 0o600 });
        chmodSync(this.file, 0o600);
        this.linesInFile += count;
      }
    } catch (error) {
      if (this.warned) return;
      this.warned = true;
      this.warn(error instanceof Error ? error.message : String(error));
    }
  }

  private load(now: number): void {
    if (this.loaded || this.file === null) return;
    this.loaded = true;
    const raws = readDataLines(this.file);
    for (const raw of raws) {
      let parsed: z.infer<typeof line>;
      try {
        parsed = line.parse(JSON.parse(raw));
      } catch {
        continue; // a line cut short by a crash mid-write, or edited by hand: the others still count
      }
      const { deployment, ...loss } = parsed;
      if (now - loss.at <= LOSSES_KEPT_MS) pushBounded(this.kept, deployment, loss);
    }
    this.linesInFile = raws.length;
    let keptCount = 0;
    for (const losses of this.kept.values()) keptCount += Math.min(losses.length, MAX_LOSSES);
    if (keptCount < raws.length) {
      try {
        this.rewrite(now);
      } catch (error) {
        this.warned = true;
        this.warn(error instanceof Error ? error.message : String(error));
      }
    }
  }

  /** Replaces the file with the losses kept (written beside it, then renamed: a crash leaves one or the other). */
  private rewrite(now: number): void {
    const file = this.file as string;
    for (const [deployment, losses] of this.kept) {
      const fresh = losses.filter((loss) => now - loss.at <= LOSSES_KEPT_MS).slice(-MAX_LOSSES);
      if (fresh.length === 0) this.kept.delete(deployment);
      else this.kept.set(deployment, fresh);
    }
    const text = lines(this.kept);
    writeFileSync(`${file}.new`, text, { mode: 0o600 });
    renameSync(`${file}.new`, file);
    this.linesInFile = [...this.kept.values()].reduce((n, l) => n + l.length, 0);
  }
}

/** Appends, trimming in batches (a restart can lose a million locks, one call each) to the newest `MAX_LOSSES`. */
function pushBounded(map: Map<string, Loss[]>, deployment: string, loss: Loss): void {
  let list = map.get(deployment);
  if (list === undefined) map.set(deployment, (list = []));
  list.push(loss);
  if (list.length >= 2 * MAX_LOSSES) list.splice(0, list.length - MAX_LOSSES);
}

function lines(byDeployment: ReadonlyMap<string, readonly Loss[]>): string {
  let out = "";
  for (const [deployment, losses] of byDeployment) {
    for (const loss of losses.slice(-MAX_LOSSES)) out += `${JSON.stringify({ deployment, ...loss })}\n`;
  }
  return out;
}
