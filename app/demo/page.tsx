export default function DemoPage() {
  return (
    <section>
      <h1>Contention lab</h1>
    </section>
  );
}
