import type { Metadata } from "next";
import { LocksView } from "@/components/locks/locks-view";

export const dynamic = "force-dynamic";

/**
 * A group's page (`?group=`) names its group in the tab's title, as a lock's page names its lock: a screen reader
 * reads it as the page opens, and tabs of several groups tell apart. The whole fleet's page keeps the console's.
 */
export async function generateMetadata({ searchParams }: { searchParams: Promise<{ group?: string | string[] }> }): Promise<Metadata> {
  const { group } = await searchParams;
  return typeof group === "string" && group !== "" ? { title: `${group} · Lockscope` } : {};
}

export default function LocksPage() {
  return (
    <section>
      <LocksView />
    </section>
  );
}
