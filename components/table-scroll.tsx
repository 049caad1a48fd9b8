"use client";

import { useEffect, useRef, useState, type ReactNode, type Ref, type RefObject } from "react";

/**
 * Whether a table's box scrolls sideways (its table is wider than it), read again whenever the box or its table
 * changes size. A passive effect: the hint comes before its box, whose ref is set only after the hint's layout
 * effects have run.
 */
function useScrollsSideways(box: RefObject<HTMLElement | null>): boolean {
  const [scrolls, setScrolls] = useState(false);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setScrolls(el.scrollWidth > el.clientWidth + 1);
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    const table = el.querySelector("table");
    if (table) observer.observe(table);
    // A table in a closed <details> is not laid out: measured again when it opens.
    const details = el.closest("details");
    details?.addEventListener("toggle", measure);
    return () => {
      observer.disconnect();
      details?.removeEventListener("toggle", measure);
    };
  }, [box]);
  return scrolls;
}

/**
 * "Scroll sideways for more columns", above a table's box while the table is wider than it: a phone shows no scroll
 * bar until one scrolls, so nothing else tells that columns are hidden to the right. Screen readers hear it in the
 * box's name ("…, scrollable") instead.
 */
export function ScrollHint({ box }: { box: RefObject<HTMLElement | null> }) {
  const scrolls = useScrollsSideways(box);
  if (!scrolls) return null;
  return (
    <p className="scroll-hint" aria-hidden="true">
      Scroll sideways for more columns <span className="scroll-hint-arrow">→</span>
    </p>
  );
}

/**
 * A box a wide table scrolls sideways in, so the page never does. It is a named, focusable region: a keyboard
 * user can focus it and scroll it with the arrow keys, and a screen reader announces what it holds. While the table
 * is wider than the box, a hint above it says so.
 */
export function TableScroll({ label, children, ref }: { label: string; children: ReactNode; ref?: Ref<HTMLDivElement> }) {
  const box = useRef<HTMLDivElement | null>(null);
  const setBox = (el: HTMLDivElement | null) => {
    box.current = el;
    if (typeof ref === "function") ref(el);
    else if (ref) ref.current = el;
  };
  return (
    <>
      <ScrollHint box={box} />
      <div ref={setBox} className="table-scroll" role="region" aria-label={label} tabIndex={0}>
        {children}
      </div>
    </>
  );
}

/**
 * A table's header: one row of column headers, in order. An entry that is `false` or null is a column not
 * shown (`showDeployment && "Deployment"`).
 */
export function TableHead({ columns }: { columns: ReadonlyArray<ReactNode> }) {
  return (
    <thead>
      <tr>
        {columns.map((column, i) =>
          column === false || column === null || column === undefined ? null : (
            <th key={i} scope="col">
              {column}
            </th>
          ),
        )}
      </tr>
    </thead>
  );
}
