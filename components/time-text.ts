/**
 * An instant as this browser writes dates, with its time zone ("Dec 6, 2026, 10:04:05 AM GMT+5:45"): the times
 * in the audit and history tables are compared with logs, alerts and colleagues' screens kept in other zones.
 */
export function timeText(at: number): string {
  return new Date(at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
}
