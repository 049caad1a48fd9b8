export default function AuditPage() {
  return (
    <section>
      <h1>Audit log</h1>
    </section>
  );
}
