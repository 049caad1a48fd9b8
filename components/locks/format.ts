import type { Lock } from "@/lib/locks/types";

export { holderLine, holderText, lockSearchText, truncate } from "@/lib/locks/holder-text";

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "∞";
  const abs = Math.max(0, ms);
  if (abs < 10_000) return `${(abs / 1000).toFixed(1)} s`;
  if (abs < 60_000) return `${Math.floor(abs / 1000)} s`;
  if (abs < 3_600_000) return `${Math.floor(abs / 60_000)} min ${Math.floor((abs % 60_000) / 1000)} s`;
  if (abs < 86_400_000) return `${Math.floor(abs / 3_600_000)} h ${Math.floor((abs % 3_600_000) / 60_000)} min`;
  return `${Math.floor(abs / 86_400_000)} d ${Math.floor((abs % 86_400_000) / 3_600_000)} h`;
}

/**
 * A group's shortest TTL (`LockGroup.shortestTtl`) as its row says it: the time left, or "elapsed" as the lock's
 * own row says it once its TTL ran out and Redis has not reclaimed the key yet (a count of no time left would
 * read as a lock about to expire).
 */
export function shortestTtlText(shortest: { expiresAt: number } | null, now: number): string {
  if (shortest === null) return "—";
  const left = shortest.expiresAt - now;
  return left <= 0 ? "elapsed" : formatDuration(left);
}

/** The lock libraries behind each format, as the table names them. */
export const FORMAT_LABEL: Record<Lock["format"], string> = {
  lockscope: "Lockscope",
  token: "token",
  redisson: "Redisson",
  "redisson-rw": "Redisson read-write",
  "redis-semaphore": "redis-semaphore",
  shedlock: "ShedLock",
  unknown: "unknown layout",
};

/** Contention as far as it can be known: a figure, or "not visible" where nothing in Redis shows it. */
export function contentionText(c: Lock["contention"]): string {
  if (c.source === null) return "not visible";
  const attempts = c.attemptsPerMin === null ? null : `${c.attemptsPerMin} failed attempts/min`;
  const waiters = c.waiters === null ? null : `${c.waiters} waiting${c.source === "queue" ? " in the library's queue" : ""}`;
  return [attempts, waiters].filter(Boolean).join(", ");
}

export const STATE_LABEL: Record<Lock["state"], string> = {
  held: "held",
  partial: "partial",
  elapsed: "TTL elapsed",
  released: "released",
  expired: "expired",
  "force-released": "force-released",
  lost: "lost",
};

/** A lock's page; `deployment` where the console watches several (the same resource may be a lock on more than one). */
export function lockHref(resource: string, deployment?: string): string {
  return `/locks/${encodeURIComponent(resource)}${deployment === undefined ? "" : `?deployment=${encodeURIComponent(deployment)}`}`;
}

/** A table's sort as the address names it (`?sort=&order=`). */
type AddressSort<K extends string = string> = { key: K; dir: 1 | -1 };

/** The sort the address names: one of `keys`, else `fallback`, ascending (the table's default). */
export function sortFromAddress<K extends string>(keys: readonly K[], fallback: K, key: string | null, order: string | null): AddressSort<K> {
  const column = keys.find((k) => k === key);
  return column ? { key: column, dir: order === "desc" ? -1 : 1 } : { key: fallback, dir: 1 };
}

/** Puts `sort` in an address (`sort`, `order`), left out where it is `fallback` ascending, the table's default. */
function putSort(params: URLSearchParams, sort: AddressSort | undefined, fallback: string): void {
  if (!sort || (sort.key === fallback && sort.dir === 1)) return;
  params.set("sort", sort.key);
  params.set("order", sort.dir === 1 ? "asc" : "desc");
}

/** `/` with `params`, or `/` alone where there are none. */
const homeHref = (params: URLSearchParams) => (params.size > 0 ? `/?${params.toString()}` : "/");

/**
 * A group's page; with a deployment, that deployment's locks of the group only. `filter`: the groups' filter it was
 * opened from, which its way back to every group restores; `within`: the search and sort of the group's own table.
 */
export function groupHref(group: string, deployment = "", filter = "", within?: { search: string; sort: AddressSort }): string {
  const params = new URLSearchParams({ group });
  if (deployment) params.set("deployment", deployment);
  if (filter) params.set("filter", filter);
  // The group's own search and sort (`within`), the defaults left out: a lock opened from it leads Back to the same rows.
  if (within?.search) params.set("q", within.search);
  putSort(params, within?.sort, "resource");
  return homeHref(params);
}

/** Where a tab keeps the address of the group table it showed last (see `rememberGroupAddress`). */
const GROUP_ADDRESS_KEY = "lockscope.group-address";

/**
 * Keeps, for this tab, the address of a group's table as it is shown (`groupHref`: its deployment, the groups'
 * filter, its own search and sort): a lock opened from it leads back to the same rows by its page's link, not only
 * by the browser's Back. Nothing is kept where the browser keeps no session storage.
 */
export function rememberGroupAddress(href: string): void {
  try {
    window.sessionStorage.setItem(GROUP_ADDRESS_KEY, href);
  } catch {
    // (Storage refused, full or absent: the way back is the group's own address.)
  }
}

/**
 * The way back from a lock's page to its group: the group's table as this tab showed it last, where that was this
 * group (every deployment's locks of it, or those of the lock's own deployment `deployment`); else the group's own
 * address.
 */
export function groupBackHref(group: string, deployment: string): string {
  const plain = groupHref(group);
  try {
    const href = window.sessionStorage.getItem(GROUP_ADDRESS_KEY);
    // Only an address of this console's own groups page (`/?group=…`): never a way off the site.
    if (href === null || !href.startsWith("/?")) return plain;
    const params = new URLSearchParams(href.slice(2));
    const shown = params.get("deployment");
    if (params.get("group") !== group || (shown !== null && shown !== deployment)) return plain;
    return href;
  } catch {
    return plain;
  }
}

/**
 * Every group, of one deployment where one is given, filtered by name where a filter is given, and sorted as `sort`
 * says (left out: by group, ascending).
 */
export function allGroupsHref(deployment: string | null, filter = "", sort?: AddressSort): string {
  const params = new URLSearchParams();
  if (deployment) params.set("deployment", deployment);
  if (filter) params.set("filter", filter);
  putSort(params, sort, "group");
  return homeHref(params);
}

/**
 * The table of every lock (a small fleet's page) as the operator left it: its filter, deployment and sort, the
 * defaults left out. Kept in the address so that a lock opened from it leads Back to the same rows, and a reload keeps them.
 */
export function locksTableHref(view: { filter: string; deployment: string; sort: AddressSort }): string {
  const params = new URLSearchParams();
  if (view.deployment) params.set("deployment", view.deployment);
  if (view.filter) params.set("filter", view.filter);
  putSort(params, view.sort, "resource");
  return homeHref(params);
}

/** The deployments the console watches, from its nodes' watchers: named only where there are several (else empty). */
export function deploymentsOf(nodes: ReadonlyArray<{ deployment?: string }>): string[] {
  const names: string[] = [];
  for (const n of nodes) if (n.deployment !== undefined && !names.includes(n.deployment)) names.push(n.deployment);
  return names.length > 1 ? names : [];
}

/**
 * How many node dots a row of the locks table has at most, which its Nodes column is laid out for: the nodes of
 * the deployment shown (`deployment`), else of the largest deployment watched (a lock's dots are its own
 * deployment's nodes, never every deployment's); 3 until the nodes are known.
 */
export function nodeColumnCount(nodes: ReadonlyArray<{ deployment?: string }> | undefined, deployment?: string | null): number {
  if (nodes === undefined) return 3;
  const names = deploymentsOf(nodes);
  if (names.length === 0) return nodes.length;
  const count = (name: string) => nodes.filter((n) => n.deployment === name).length;
  return deployment && names.includes(deployment) ? count(deployment) : Math.max(...names.map(count));
}

export function remainingMs(lock: Lock, now: number, offsetMs: number): number {
  if (lock.expiresAt === null) return Infinity;
  return lock.expiresAt - (now + offsetMs);
}
