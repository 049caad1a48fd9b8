import { AuditLog } from "@/components/audit/audit-log";
import { HeldAtLookup } from "@/components/audit/lock-history";

export const metadata = { title: "Audit log · Lockscope" };
export const dynamic = "force-dynamic";

type SearchParams = Promise<Record<string, string | string[] | undefined>>;

/** `?from=` and `?to=` arrive as ISO instants; the inputs want local `YYYY-MM-DDTHH:mm:ss`. */
function localInput(value: string | string[] | undefined): string {
  if (typeof value !== "string") return "";
  const ms = /^\d{1,15}$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) return "";
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 19);
}

export default async function AuditPage({ searchParams }: { searchParams: SearchParams }) {
  const params = await searchParams;
  const text = (v: string | string[] | undefined) => (typeof v === "string" ? v.slice(0, 1024) : "");
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">Every force release and lock-pattern change: who, when, why, and what it did (for a release, on each node). Newest first.</p>
      <AuditLog initial={{ resource: text(params.resource), actor: text(params.actor), from: localInput(params.from), to: localInput(params.to) }} />
      <HeldAtLookup />
    </section>
  );
}
