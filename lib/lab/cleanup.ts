import { openLabClient } from "./connections";
import { runKeys } from "./keys";
import { errorText } from "../echoed-arguments";

/** A node that could not be cleaned at the end of a run is tried again this often, for this long. */
const RETRY_EVERY_MS = 2_000;
const RETRY_FOR_MS = 10 * 60_000;


/** Deletes every key of run `id` on one node, by name (one pipeline); throws when the node fails. */
async function removeFromNode(url: string, id: string): Promise<void> {
  const { cleanupKeys } = runKeys(id);
  const client = openLabClient(url, 2000, `lockscope:lab:${id}:cleanup`);
  try {
    await client.connect();
    // One UNLINK a key: a key the node's ACL refuses (a companion the strategy never made) does not keep the others.
    const pipeline = client.pipeline();
    for (const key of cleanupKeys) pipeline.unlink(key);
    const replies = (await pipeline.exec()) ?? [];
    const failed = replies.find(([error]) => error)?.[0];
    if (failed) throw failed;
  } finally {
    client.disconnect();
  }
}

/**
 * Deletes every key of run `id` on every node, by name (see `RunKeys.cleanupKeys`), and nothing else.
 * Resolves a note per node that could not be cleaned. By default the keys there expire by their TTL. With
 * `untilAnswered` (the end of a run), such a node is cleaned again in the background until it answers (every 2 s,
 * for up to 10 minutes), then once more: a node that stalled (stopped, overloaded) runs the workers' last writes
 * once it answers again, after the run has stopped renewing its keys, and a key an engine write makes then (a
 * fence) has no TTL and no run left to remove it.
 */
export async function removeRunKeys(nodeUrls: readonly string[], id: string, { untilAnswered = false } = {}): Promise<string[]> {
  const notes: string[] = [];
  await Promise.all(
    nodeUrls.map((url, node) =>
      removeFromNode(url, id).catch((error: unknown) => {
        if (!untilAnswered) {
          notes.push(`Could not remove this run's keys from node ${node}: ${errorText(error)} (they expire by their TTL).`);
          return;
        }
        notes.push(`Could not remove this run's keys from node ${node} yet: ${errorText(error)}; trying again until it answers.`);
        retry(url, id, performance.now() + RETRY_FOR_MS);
      }),
    ),
  );
  return notes;
}

function retry(url: string, id: string, until: number, passesLeft = 2): void {
  if (passesLeft === 0 || performance.now() > until) return;
  setTimeout(() => {
    removeFromNode(url, id).then(
      // Answered: one more pass, for writes the node had queued and ran just after this one.
      () => retry(url, id, until, passesLeft - 1),
      () => retry(url, id, until, passesLeft),
    );
  }, RETRY_EVERY_MS).unref();
}
