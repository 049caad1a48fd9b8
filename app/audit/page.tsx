import { AuditLog } from "@/components/audit/audit-log";
import { HeldAtLookup } from "@/components/audit/lock-history";
import { addressInstant } from "@/server/audit/query";
import { watchedDeploymentNames } from "@/server/nodes";

export const metadata = { title: "Audit log · Lockscope" };
export const dynamic = "force-dynamic";

type SearchParams = Promise<Record<string, string | string[] | undefined>>;

export default async function AuditPage({ searchParams }: { searchParams: SearchParams }) {
  const params = await searchParams;
  const text = (v: string | string[] | undefined) => (typeof v === "string" ? v.slice(0, 1024) : "");
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">Every force release and lock-pattern change: who, when, why, and what it did (for a release, on each node). Newest first.</p>
      <AuditLog
        initial={{ resource: text(params.resource), actor: text(params.actor), deployment: text(params.deployment), from: addressInstant(params.from), to: addressInstant(params.to) }}
        deployments={watchedDeploymentNames()}
      />
      <HeldAtLookup />
    </section>
  );
}
