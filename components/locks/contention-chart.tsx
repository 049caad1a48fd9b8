"use client";

import { useEffect, useRef } from "react";
import "uplot/dist/uPlot.min.css";

/** Failed attempts per 10 s over the last minutes (uPlot), with the same figures as text for screen readers. */
export function ContentionChart({ history }: { history: { bucketMs: number; endsAt: number; attempts: number[] } }) {
  const host = useRef<HTMLDivElement>(null);
  const total = history.attempts.reduce((a, b) => a + b, 0);
  const minutes = Math.round((history.attempts.length * history.bucketMs) / 60_000);
  const key = history.attempts.join(",");
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    let plot: { destroy(): void } | null = null;
    let cancelled = false;
    void import("uplot").then(({ default: UPlot }) => {
      if (cancelled) return;
      const n = history.attempts.length;
      const xs = history.attempts.map((_, i) => (history.endsAt - (n - i) * history.bucketMs) / 1000);
      const style = getComputedStyle(document.documentElement);
      const stroke = style.getPropertyValue("--other").trim() || "#b26a00";
      const axis = style.getPropertyValue("--muted").trim() || "#888";
      plot = new UPlot(
        {
          width: Math.max(320, el.clientWidth),
          height: 180,
          legend: { show: false },
          cursor: { show: true },
          scales: { y: { range: (_u, _min, max) => [0, Math.max(4, max)] } },
          axes: [
            { stroke: axis, grid: { stroke: "rgba(128,128,128,0.15)" } },
            { stroke: axis, grid: { stroke: "rgba(128,128,128,0.15)" }, label: "attempts / 10 s" },
          ],
          series: [{}, { label: "failed attempts", stroke, fill: `${stroke}33`, width: 1.5 }],
        },
        [xs, history.attempts],
        el,
      );
    });
    return () => {
      cancelled = true;
      plot?.destroy();
    };
    // Redraw only when the figures change.
  }, [key, history.endsAt, history.bucketMs, history.attempts]);
  return (
    <figure className="contention-chart">
      <div ref={host} role="img" aria-label={`Failed acquisition attempts per 10 seconds over the last ${minutes} minutes: ${total} in total`} />
      <figcaption className="muted">
        {total === 0 ? `No failed attempts in the last ${minutes} minutes.` : `${total} failed attempts in the last ${minutes} minutes (engine telemetry).`}
      </figcaption>
    </figure>
  );
}
