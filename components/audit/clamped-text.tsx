"use client";

import { useId, useLayoutEffect, useRef, useState } from "react";
import styles from "./audit-log.module.css";

/**
 * A cell's long text (a lock-pattern change's list of 24 globs, a reason of several sentences) clamped to a few lines,
 * with a "Show all" / "Show less" button where it does not fit: a row stays about as tall as its neighbours instead of
 * a screen or two. The whole text stays in the page while clamped (a screen reader reads it, find-in-page finds it);
 * only its overflow is hidden. `about` names whose text it is, for the button's name ("the reason of the release of
 * lock:orders/42 at …"): every row may have one.
 */
export function ClampedText({ text, about, className }: { text: string; about: string; className?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const id = useId();
  const [open, setOpen] = useState(false);
  const [overflows, setOverflows] = useState(false);
  // Measured while clamped only (open, the text fits by definition), again whenever the cell's width changes it.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el || open) return;
    const measure = () => setOverflows(el.scrollHeight > el.clientHeight + 1);
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, [open, text]);
  return (
    <div className={styles.clampCell}>
      <div id={id} ref={box} className={`${open ? "" : styles.clamped} ${className ?? ""}`}>
        {text}
      </div>
      {(overflows || open) && (
        <button
          type="button"
          className={`button small ${styles.clampToggle}`}
          aria-expanded={open}
          aria-controls={id}
          aria-label={`${open ? "Show less" : "Show all"} of ${about}`}
          onClick={() => setOpen(!open)}
        >
          {open ? "Show less" : "Show all"}
        </button>
      )}
    </div>
  );
}
