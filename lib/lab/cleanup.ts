import { openLabClient } from "./connections";
import { runKeys } from "./keys";

/**
 * Deletes every key of run `id` on every node: `SCAN MATCH` on the run's exact prefixes, and nothing
 * else. Resolves a note per node that could not be cleaned (the keys there expire by their TTL).
 */
export async function removeRunKeys(nodeUrls: readonly string[], id: string): Promise<string[]> {
  const { cleanupPatterns } = runKeys(id);
  const notes: string[] = [];
  await Promise.all(
    nodeUrls.map(async (url, node) => {
      const client = openLabClient(url, 2000, `lockscope:lab:${id}:cleanup`);
      try {
        await client.connect();
        for (const pattern of cleanupPatterns) {
          let cursor = "0";
          do {
            const [next, keys] = await client.scan(cursor, "MATCH", pattern, "COUNT", 1000);
            cursor = next;
            if (keys.length > 0) await client.unlink(...keys);
          } while (cursor !== "0");
        }
      } catch (error) {
        notes.push(`Could not remove this run's keys from node ${node}: ${error instanceof Error ? error.message : String(error)} (they expire by their TTL).`);
      } finally {
        client.disconnect();
      }
    }),
  );
  return notes;
}
