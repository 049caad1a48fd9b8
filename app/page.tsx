export const dynamic = "force-dynamic";

export default function LocksPage() {
  return (
    <section>
      <h1>Locks</h1>
      <p className="muted">Every lock on every node, live.</p>
    </section>
  );
}
