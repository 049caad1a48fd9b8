import { LockHistory } from "@/components/audit/lock-history";
import { LockDetailView } from "@/components/locks/lock-detail";

export const dynamic = "force-dynamic";

export const metadata = { title: "Lock · Lockscope" };

/** Next.js hands the segment over percent-encoded in some versions and decoded in others: decode once, leniently. */
function decodeSegment(segment: string): string {
  if (!/%[0-9A-Fa-f]{2}/.test(segment)) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export default async function LockPage({ params, searchParams }: { params: Promise<{ resource: string }>; searchParams: Promise<{ deployment?: string | string[] }> }) {
  const { resource } = await params;
  const name = decodeSegment(resource);
  // Where the console watches several deployments, the URL names the lock's (`?deployment=`).
  const { deployment } = await searchParams;
  const on = typeof deployment === "string" ? { deployment } : {};
  return (
    <>
      <LockDetailView resource={name} {...on} />
      <LockHistory resource={name} {...on} />
    </>
  );
}
