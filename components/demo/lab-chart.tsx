"use client";

import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface ChartLine {
  label: string;
  color: string;
}

interface Props {
  title: string;
  unit: string;
  lines: ChartLine[];
  /** x (seconds since the start), then one array per line; null leaves a gap. */
  data: [number[], ...Array<Array<number | null>>];
}

/**
 * A small streaming time-series chart (uPlot: canvas, made for data that grows several times a second).
 * The plot is created once and fed with setData, so polling never rebuilds it.
 */
export function LabChart({ title, unit, lines, data }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const latest = useRef(data);
  latest.current = data;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const muted = getComputedStyle(document.documentElement).getPropertyValue("--muted").trim() || "#888";
    const grid = getComputedStyle(document.documentElement).getPropertyValue("--border").trim() || "#ddd";
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const made = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: 170,
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: false } },
        axes: [
          { ...axis, label: "seconds", size: 36 },
          { ...axis, label: unit, size: 50 },
        ],
        series: [{ label: "t (s)" }, ...lines.map((l) => ({ label: l.label, stroke: l.color, width: 2, spanGaps: false, points: { show: false } }))],
      },
      latest.current,
      el,
    );
    plot.current = made;
    const resize = new ResizeObserver(() => made.setSize({ width: Math.max(240, el.clientWidth), height: 170 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      made.destroy();
      plot.current = null;
    };
    // The plot's shape (lines, unit) is fixed per chart; data flows in through the effect below.
  }, []);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return (
    <figure className="lab-chart" aria-label={title}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
    </figure>
  );
}
