import { LocksView } from "@/components/locks/locks-view";

export const dynamic = "force-dynamic";

export default function LocksPage() {
  return (
    <section>
      <LocksView />
    </section>
  );
}
