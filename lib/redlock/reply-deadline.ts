/**
 * Calls `onLate` once `ms` have passed and the replies that had come in by then have been read, unless the
 * returned cancel function is called first. A plain timer is not enough to judge a node late: when this process's
 * own event loop is held up past `ms` (a GC pause, a long synchronous task), Node runs the due timer before it reads
 * the sockets, and a node whose reply came in time, and waits unread, would count as one that did not answer.
 * `setImmediate` runs after the loop's next read of the sockets, so by then every reply already received has settled.
 * A node that truly does not answer is judged late one turn of the loop after `ms` (well under a millisecond on a
 * loop that is not held up).
 */
export function setReplyDeadline(onLate: () => void, ms: number): () => void {
  let immediate: ReturnType<typeof setImmediate> | undefined;
  const timer = setTimeout(() => {
    immediate = setImmediate(onLate);
  }, ms);
  return () => {
    clearTimeout(timer);
    if (immediate !== undefined) clearImmediate(immediate);
  };
}
