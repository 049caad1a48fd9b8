import "server-only";
import { singleton } from "../global";
import { declared } from "../metrics";
import { getDatabase } from "../postgres/pool";
import { onShutdown } from "../shutdown";
import { createFileAndStreamAudit } from "./log";
import { OutcomeRetryingStore } from "./outcome-retry";
import { PostgresAudit } from "./postgres";
import type { AuditStore } from "./store";

/**
 * The process's audit store: PostgreSQL when AUDIT_DATABASE_URL is set, else the file and the nodes' stream; either
 * retries the outcomes it did not take until it does.
 */
export function getAuditStore(): AuditStore {
  return singleton("audit-store", () => {
    const db = getDatabase();
    const pending = declared("lockscope_audit_outcomes_pending");
    const store: AuditStore = new OutcomeRetryingStore(db ? new PostgresAudit(db) : createFileAndStreamAudit(), { onWaiting: (count) => pending.set(count) });
    onShutdown("audit", 30, () => store.drain());
    return store;
  });
}
