import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ServiceModule from "@/server/history/service";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";

/**
 * The hourly check for holds whose end no console saw reads the open holds, then asks the live view whether each is
 * still held. A lock that ends in between is no longer held by then, and its end event is on its way to the
 * database: it is a hold whose end was seen, and it ends as it did (released, at its time), not as `unseen`.
 */
describe("lock history: a hold that ends while the unseen-holds check runs", () => {
  let history: HistoryConsole | undefined;
  let url: string;
  let service: typeof ServiceModule;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ url } = history);
    service = await import("@/server/history/service");
  }, 60_000);

  afterAll(async () => {
    await history?.tearDown();
  });

  it("ends it as released, when it was released", async () => {
    const resource = "lock:race/ending";
    const sink = service.getHistory()!.recorder;
    const acquiredAt = Date.now() - 10 * 60_000;
    sink.record({ at: acquiredAt, resource, deployment: "default", type: "acquired", token: "tok-1" });
    expect(await sink.flush()).toBe(true);

    let releasedAt = 0;
    // The live view's answer, asked after the open holds were read: the lock was released just now (its end
    // recorded at that moment, as the live view records every end it sees), so it is not held.
    const ended = await service.endUnseenHolds("default", (r, token) => {
      if (r === resource && token === "tok-1" && releasedAt === 0) {
        releasedAt = Date.now();
        sink.record({ at: releasedAt, resource, deployment: "default", type: "released", token: "tok-1" });
      }
      return false;
    });
    expect(await sink.flush()).toBe(true);

    const db = new pg.Client(url);
    await db.connect();
    try {
      const { rows } = await db.query<{ end_type: string; ended_ms: string }>(
        "SELECT end_type, (extract(epoch FROM ended_at) * 1000)::bigint AS ended_ms FROM lock_holds WHERE resource = $1",
        [resource],
      );
      expect(rows).toEqual([{ end_type: "released", ended_ms: String(releasedAt) }]);
    } finally {
      await db.end();
    }
    expect(ended).toBe(0);
  });
});
