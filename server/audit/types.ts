import "server-only";

export type { AuditAnswer, AuditEntry, AuditFilters, AuditHolder, AuditNodeResult, AuditOutcome, AuditPage } from "@/lib/audit/types";
