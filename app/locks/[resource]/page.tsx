import { LockHistory } from "@/components/audit/lock-history";
import { LockDetailView } from "@/components/locks/lock-detail";

export const dynamic = "force-dynamic";

/** Next.js hands the segment over percent-encoded in some versions and decoded in others: decode once, leniently. */
function decodeSegment(segment: string): string {
  if (!/%[0-9A-Fa-f]{2}/.test(segment)) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The tab's title names the lock (the address does already): a screen reader reads it as the page opens, and tabs of several locks tell apart. */
export async function generateMetadata({ params }: { params: Promise<{ resource: string }> }) {
  const { resource } = await params;
  return { title: `${decodeSegment(resource)} · Lockscope` };
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
