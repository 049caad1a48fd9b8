import { LabClient } from "@/components/demo/lab-client";

export const dynamic = "force-dynamic";

export default function DemoPage() {
  return (
    <section>
      <h1>Contention lab</h1>
      <p className="muted">
        A flash sale as an experiment: buyers read the stock, decrement it and write it back, under no lock, the naive SETNX
        lock, Redlock, fenced Redlock or an atomic script, with pauses and node faults injected. Each worker is its own Redis client; the
        run&apos;s lock shows up on the Locks page while it runs.
      </p>
      <LabClient />
    </section>
  );
}
