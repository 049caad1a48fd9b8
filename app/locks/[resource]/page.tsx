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

export default async function LockPage({ params }: { params: Promise<{ resource: string }> }) {
  const { resource } = await params;
  const name = decodeSegment(resource);
  return (
    <>
      <LockDetailView resource={name} />
      <LockHistory resource={name} />
    </>
  );
}
