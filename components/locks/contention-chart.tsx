"use client";

import { useEffect, useRef } from "react";
import "uplot/dist/uPlot.min.css";
import { themeColor, useResolvedTheme, withAlpha } from "../theme-switch";

const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
/** The time axis's steps, in seconds: ticks fall on whole minutes only (1, 2, 5, 10… of them). */
const TIME_STEPS = [60, 120, 300, 600, 1_800, 3_600];

/**
 * The time axis's labels: one line each, all in one format ("2:50 PM", "14:50"), and the least room a tick needs so
 * that two labels never touch. uPlot's own labels add the date under the first one, wider than the gap to the next,
 * and how close that next tick is depends on where the window starts.
 */
function timeAxis(): { format: (seconds: number) => string; space: number; widest: number } {
  const format = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
  const ctx = document.createElement("canvas").getContext("2d");
  let widest = 60;
  if (ctx) {
    ctx.font = AXIS_FONT;
    for (const hour of [0, 10, 12, 22, 23]) widest = Math.max(widest, ctx.measureText(format.format(new Date(2026, 0, 1, hour, 58))).width);
  }
  return { format: (seconds) => format.format(new Date(seconds * 1000)), space: Math.ceil(widest) + 16, widest };
}

/** Failed attempts per 10 s over the last minutes (uPlot), with the same figures as text for screen readers. */
export function ContentionChart({ history }: { history: { bucketMs: number; endsAt: number; attempts: number[] } }) {
  const host = useRef<HTMLDivElement>(null);
  const total = history.attempts.reduce((a, b) => a + b, 0);
  const minutes = Math.round((history.attempts.length * history.bucketMs) / 60_000);
  const key = history.attempts.join(",");
  const theme = useResolvedTheme();
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    let plot: { destroy(): void; setSize(size: { width: number; height: number }): void } | null = null;
    const resize = new ResizeObserver(() => plot?.setSize({ width: Math.max(240, el.clientWidth), height: 180 }));
    let cancelled = false;
    void import("uplot").then(({ default: UPlot }) => {
      if (cancelled) return;
      const n = history.attempts.length;
      const xs = history.attempts.map((_, i) => (history.endsAt - (n - i) * history.bucketMs) / 1000);
      const stroke = themeColor("--other", "#9a5b00");
      const axis = themeColor("--muted", "#888");
      const grid = themeColor("--chart-grid", "rgba(128,128,128,0.15)");
      const time = timeAxis();
      plot = new UPlot(
        {
          width: Math.max(240, el.clientWidth),
          height: 180,
          legend: { show: false },
          cursor: { show: true },
          scales: { y: { range: (_u, _min, max) => [0, Math.max(4, max)] } },
          axes: [
            {
              stroke: axis,
              grid: { stroke: grid },
              font: AXIS_FONT,
              incrs: TIME_STEPS,
              space: time.space,
              // Whole multiples of the step inside the window (uPlot's own may add one past its end, cut by the edge),
              // leaving out a tick so near the chart's right edge that its label, centred on it, would be cut there.
              splits: (u, _axis, min, max, step) => {
                const ratio = window.devicePixelRatio || 1;
                const plotRight = (u.bbox.left + u.bbox.width) / ratio;
                const pxPerSecond = u.bbox.width / ratio / Math.max(1, max - min);
                const ticks: number[] = [];
                for (let t = Math.ceil(min / step) * step; t <= max; t += step) {
                  if (plotRight + (t - max) * pxPerSecond + time.widest / 2 > u.width) continue;
                  ticks.push(t);
                }
                return ticks;
              },
              values: (_u, splits) => splits.map(time.format),
            },
            { stroke: axis, grid: { stroke: grid }, font: AXIS_FONT, label: "attempts / 10 s" },
          ],
          series: [{}, { label: "failed attempts", stroke, fill: withAlpha(stroke, 0.2), width: 1.5 }],
        },
        [xs, history.attempts],
        el,
      );
      resize.observe(el);
    });
    return () => {
      cancelled = true;
      resize.disconnect();
      plot?.destroy();
    };
    // Redraw only when the figures or the theme (its colours) change.
  }, [key, history.endsAt, history.bucketMs, history.attempts, theme]);
  return (
    <figure className="contention-chart">
      <div ref={host} className="chart-box" role="img" aria-label={`Failed acquisition attempts per 10 seconds over the last ${minutes} minutes: ${total} in total`} />
      <figcaption className="muted">
        {total === 0 ? `No failed attempts in the last ${minutes} minutes.` : `${total} failed attempt${total === 1 ? "" : "s"} in the last ${minutes} minutes (engine telemetry).`}
      </figcaption>
    </figure>
  );
}
