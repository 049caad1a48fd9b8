import { STRATEGIES, type RunSettings } from "./settings";

/**
 * Ready-made experiments for the Demo page, each showing one lesson about locks. A preset with several
 * runs is played one run after another (one run at a time over the same lock nodes, whichever console starts it) and read side by side.
 */
export interface LabPreset {
  id: string;
  name: string;
  /** What to look for in the results. */
  lesson: string;
  runs: RunSettings[];
}

const pausesPastTtl = { ttlMs: 200, workMs: 5, pause: { probability: 0.04, ms: 450 } } as const;

export const LAB_PRESETS: readonly LabPreset[] = Object.freeze([
  {
    id: "read-modify-write-race",
    name: "The read-modify-write race",
    lesson: "No lock: buyers read the same stock and write it back, so units are sold twice (lost updates).",
    runs: [{ strategy: "none", stock: 200, workers: 50, ttlMs: 1000, workMs: 5 }],
  },
  {
    id: "naive-pauses",
    name: "Naive lock with pauses",
    lesson: "A holder stalls past the SETNX lock's TTL, the next buyer gets the lock, and both write: lost updates.",
    runs: [{ strategy: "naive", stock: 100, workers: 20, ...pausesPastTtl }],
  },
  {
    id: "redlock-kill",
    name: "Redlock with a node killed",
    lesson: "One of three nodes dies mid-run and comes back after the TTL: the quorum holds, the stock is sold exactly.",
    runs: [{ strategy: "redlock", stock: 400, workers: 50, ttlMs: 1000, workMs: 5, fault: { node: 1, kind: "kill", atMs: 1000, forMs: 2500 } }],
  },
  {
    id: "fenced-pauses",
    name: "Fenced Redlock with pauses",
    lesson: "The same pauses past the TTL, but stale holders' writes are refused by their fence: no lost update.",
    runs: [{ strategy: "redlock-fenced", stock: 100, workers: 20, ...pausesPastTtl }],
  },
  {
    id: "all-strategies",
    name: "All strategies side by side",
    lesson: "Every strategy on the same sale with pauses past the TTL; atomic is the ceiling a lock has to justify itself against.",
    runs: STRATEGIES.map((strategy) => ({ strategy, stock: 100, workers: 20, ...pausesPastTtl })),
  },
] satisfies LabPreset[]);

export function findPreset(id: string): LabPreset | undefined {
  return LAB_PRESETS.find((p) => p.id === id);
}
