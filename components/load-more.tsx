"use client";

import { useMemo, useRef, useState, type RefObject } from "react";

/** How a "load more" control and its announcements name the rows it adds. */
export interface LoadMoreWords {
  /** The button's label: "Load older entries". */
  label: string;
  /** Its label while the rows load: "Loading older entries…". */
  busyLabel: string;
  /** One row added, several: "older entry", "older entries". */
  one: string;
  many: string;
  /** What happened to them: "loaded" ("3 older entries loaded."). */
  done: string;
  /** Said once nothing more is left: "No older entries are left." */
  end: string;
  /** Said when a load added no row yet more can be asked for (a filtered search through a long log). */
  noneYet: string;
}

/** What a load ended with: every row's key in order (the new ones among them), whether more is left, whether it failed. */
export interface LoadedRows {
  keys: readonly string[];
  more: boolean;
  failed: boolean;
}

/**
 * What a load that ended (not failed) means for the user: what the status says, and where focus goes: to the first row
 * added; with none added and more left, it stays on the button (`null`); with none added and nothing left (the button
 * goes), to the last row, or with no row at all to the fallback. `shown`: the rows' keys when the button was pressed.
 */
export function afterLoad(shown: readonly string[], answer: LoadedRows, words: LoadMoreWords): { said: string; focus: { row: string } | "fallback" | null } {
  const last = shown.at(-1);
  // The rows after the last one shown (a refresh meanwhile may have added newer rows at the top: not these). Should
  // that row be gone, the rows not shown before.
  const after = last === undefined ? -1 : answer.keys.lastIndexOf(last);
  const before = new Set(shown);
  const added = after >= 0 || last === undefined ? answer.keys.slice(after + 1) : answer.keys.filter((key) => !before.has(key));
  const n = added.length;
  if (n > 0) return { said: `${n.toLocaleString("en")} ${n === 1 ? words.one : words.many} ${words.done}.${answer.more ? "" : ` ${words.end}`}`, focus: { row: added[0]! } };
  if (answer.more) return { said: words.noneYet, focus: null };
  const end = answer.keys.at(-1);
  return { said: words.end, focus: end === undefined ? "fallback" : { row: end } };
}

/**
 * A "load more" button that keeps a keyboard or screen-reader user's place. While the rows load the button stays
 * where it is, focused, marked `aria-disabled` (a disabled or removed button would drop focus to the page's top);
 * once they are in, focus moves to the first row added and a polite status says how many came, and when nothing more
 * is left. A load that adds no row leaves focus on the button, or (the button gone) on the last row, or on `fallback`.
 *
 * `keys`: the rows shown now, in order. `load` asks for more and resolves once the answer is in (rejecting never:
 * a failed load says so in the page's own alert, and focus stays on the button, still there to try again).
 */
export function useLoadMore({ keys, words, load, fallback }: { keys: readonly string[]; words: LoadMoreWords; load: () => Promise<LoadedRows>; fallback?: RefObject<HTMLElement | null> }) {
  const button = useRef<HTMLButtonElement>(null);
  const [busy, setBusy] = useState(false);
  // (Also a ref: a second press can come before the first one's state is drawn.)
  const loading = useRef(false);
  const [said, setSaid] = useState("");
  // The row focus goes to, once it is drawn (it may be drawn after the load's answer comes). A new object per load,
  // so the same row can take focus again; `pending` makes it take focus once, not each time it is drawn anew.
  const [target, setTarget] = useState<{ key: string } | null>(null);
  const pending = useRef(false);

  // Focus moves only where the user left it on the button (or the button went): never away from somewhere they moved on to.
  const focusable = () => {
    const active = document.activeElement;
    return active === null || active === document.body || active === button.current;
  };

  const focusRow = useMemo(
    () => (element: HTMLElement | null) => {
      if (!element || !pending.current || !target) return;
      pending.current = false;
      if (focusable()) element.focus();
    },
    [target],
  );

  async function press() {
    if (loading.current) return;
    loading.current = true;
    const shown = keys;
    setBusy(true);
    setSaid("");
    const answer = await load().finally(() => {
      loading.current = false;
      setBusy(false);
    });
    if (answer.failed) return;
    const { said, focus } = afterLoad(shown, answer, words);
    setSaid(said);
    if (focus === "fallback") {
      if (focusable()) fallback?.current?.focus();
    } else if (focus) {
      pending.current = true;
      setTarget({ key: focus.row });
    }
  }

  return {
    said,
    /** Props for a row: the row focus moves to is focusable by script (`tabIndex` -1), not by Tab. */
    rowProps: (key: string) => (target?.key === key ? { ref: focusRow, tabIndex: -1 } : {}),
    button: { ref: button, busy, press, words },
  };
}

/**
 * The status that reads out what a load added (always drawn: a live region is read when its text changes), and the
 * button while more is left (`more`).
 */
export function LoadMore({ control, more, className }: { control: ReturnType<typeof useLoadMore>; more: boolean; className?: string }) {
  const { ref, busy, press, words } = control.button;
  return (
    <>
      <p className="sr-only" role="status">
        {control.said}
      </p>
      {more && (
        <div className={className}>
          <button ref={ref} type="button" className="button" aria-disabled={busy || undefined} onClick={() => void press()}>
            {busy ? words.busyLabel : words.label}
          </button>
        </div>
      )}
    </>
  );
}
