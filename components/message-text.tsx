import { Fragment } from "react";

/**
 * A message from the console's API, which quotes names Markdown-style (No node holds `lock:x`): each
 * `quoted` part is shown as code, and no backtick is ever shown. An unpaired backtick is dropped.
 */
export function MessageText({ text }: { text: string }) {
  const parts = text.split("`");
  // split gives code at odd indexes; with an odd number of backticks the last part has no closing one.
  const closed = parts.length % 2 === 1 ? parts.length : parts.length - 1;
  return (
    <>
      {parts.map((part, i) => (i % 2 === 1 && i < closed ? <code key={i}>{part}</code> : <Fragment key={i}>{part}</Fragment>))}
    </>
  );
}
