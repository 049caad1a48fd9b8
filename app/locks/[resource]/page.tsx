import { LockHistory } from "@/components/audit/lock-history";
import { LockDetailView } from "@/components/locks/lock-detail";

export const dynamic = "force-dynamic";

/**
 * Next.js hands a page its segment percent-encoded (`encodeURIComponent` of the key, whatever the address spelt),
 * and `generateMetadata` the same segment decoded: each is read as it comes, the page's decoded once. Decoding the
 * metadata's again turned the key `lock:user%40example.com` into the title of another lock, `lock:user@example.com`.
 */
function keyFromPageSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The tab's title names the lock (the address does already): a screen reader reads it as the page opens, and tabs of several locks tell apart. */
export async function generateMetadata({ params }: { params: Promise<{ resource: string }> }) {
  const { resource } = await params;
  return { title: `${resource} · Lockscope` };
}

export default async function LockPage({ params, searchParams }: { params: Promise<{ resource: string }>; searchParams: Promise<{ deployment?: string | string[] }> }) {
  const { resource } = await params;
  const name = keyFromPageSegment(resource);
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
