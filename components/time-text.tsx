const FORMAT: Intl.DateTimeFormatOptions = { dateStyle: "medium", timeStyle: "long" };

/**
 * An instant as this browser writes dates, with its time zone ("Dec 6, 2026, 10:04:05 AM GMT+5:45"): the times
 * in the audit and history tables are compared with logs, alerts and colleagues' screens kept in other zones.
 */
export function timeText(at: number): string {
  return new Date(at).toLocaleString(undefined, FORMAT);
}

/**
 * `timeText` in a table cell: it may break between the date and the time, and nowhere else, so a narrow table keeps
 * its columns in its box rather than scrolling sideways. Its text is `timeText`'s.
 */
export function TimeText({ at }: { at: number }) {
  const parts = new Intl.DateTimeFormat(undefined, FORMAT).formatToParts(new Date(at));
  const clock = parts.findIndex((p) => p.type === "hour");
  const text = (from: number, to?: number) => parts.slice(from, to).map((p) => p.value).join("");
  const date = clock > 0 ? text(0, clock) : "";
  // (Where the date's parts end in a space, the break takes its place.)
  if (date === "" || !date.endsWith(" ")) return <span className="nowrap">{timeText(at)}</span>;
  return (
    <>
      <span className="nowrap">{date.slice(0, -1)}</span> <span className="nowrap">{text(clock)}</span>
    </>
  );
}
