import "server-only";

export type { AuditEntry, AuditFilters, AuditHolder, AuditNodeResult, AuditOutcome, AuditPage } from "@/lib/audit/types";
