"use client";

import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { themeColor, useResolvedTheme } from "../theme-switch";

export interface ChartLine {
  label: string;
  /** A theme colour variable (`--chart-…`), resolved for the theme on screen. */
  color: string;
  /** Dashed, so two lines of one chart differ by more than colour. */
  dashed?: boolean;
}

interface Props {
  title: string;
  unit: string;
  lines: ChartLine[];
  /** x (seconds since the start), then one array per line; null leaves a gap. */
  data: [number[], ...Array<Array<number | null>>];
}

/**
 * Marks the chart's box while the pointer is on the plot: the legend shows values only then (globals.css),
 * and otherwise just names the lines.
 */
function legendWhileHovering(box: HTMLElement): Array<(u: uPlot) => void> {
  return [(u: uPlot) => void box.classList.toggle("cursor-on", u.cursor.idx != null)];
}

/**
 * A small streaming time-series chart (uPlot: canvas, made for data that grows several times a second).
 * The plot is created once per theme and fed with setData, so polling never rebuilds it.
 */
export function LabChart({ title, unit, lines, data }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const latest = useRef(data);
  latest.current = data;
  const theme = useResolvedTheme();

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const muted = themeColor("--muted", "#888");
    const grid = themeColor("--chart-grid", "#ddd");
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const made = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height: 170,
        legend: { show: true, live: true },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: false } },
        axes: [
          { ...axis, label: "seconds", size: 36 },
          { ...axis, label: unit, size: 50 },
        ],
        series: [
          { label: "t (s)" },
          ...lines.map((l) => ({ label: l.label, stroke: themeColor(l.color, "#888"), width: 2, spanGaps: false, points: { show: false }, ...(l.dashed ? { dash: [6, 4] } : {}) })),
        ],
        hooks: { setCursor: legendWhileHovering(el) },
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
    // The plot's shape (lines, unit) is fixed per chart; it is rebuilt only for a change of theme (its colours),
    // and data flows in through the effect below.
  }, [theme]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return (
    <figure className="lab-chart" aria-label={title}>
      <figcaption>{title}</figcaption>
      <div ref={box} className="chart-box" />
    </figure>
  );
}
