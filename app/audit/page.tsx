import { AuditLog } from "@/components/audit/audit-log";
import { HeldAtLookup } from "@/components/audit/lock-history";

export const metadata = { title: "Audit log · Lockscope" };
export const dynamic = "force-dynamic";

type SearchParams = Promise<Record<string, string | string[] | undefined>>;

/**
 * `?from=` and `?to=` (ISO instants or epoch ms) as ISO instants. The browser turns them into its own local time
 * for the inputs: this server's time zone is not the reader's.
 */
function instant(value: string | string[] | undefined): string {
  if (typeof value !== "string") return "";
  const ms = /^\d{1,15}$/.test(value) ? Number(value) : Date.parse(value);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : "";
}

export default async function AuditPage({ searchParams }: { searchParams: SearchParams }) {
  const params = await searchParams;
  const text = (v: string | string[] | undefined) => (typeof v === "string" ? v.slice(0, 1024) : "");
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">Every force release and lock-pattern change: who, when, why, and what it did (for a release, on each node). Newest first.</p>
      <AuditLog initial={{ resource: text(params.resource), actor: text(params.actor), from: instant(params.from), to: instant(params.to) }} />
      <HeldAtLookup />
    </section>
  );
}
