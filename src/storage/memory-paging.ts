/**
 * Lazy paging over several ascending id runs, for the in-memory backends (memory, JSONL). A fork-aware
 * read is a concatenation of per-segment slices (§2.4); walking them lazily with early stop keeps a read
 * at "fork depth plus the requested range": binary search finds each run's bounds, then only the items
 * of the page (plus one look-ahead match for `next`) and the non-matching items between them are touched.
 * Semantics equal `pageOf` in shared.ts (see `Cursor`).
 */
import type { Cursor, Id, Page } from "./records.js";
import { checkCursor, lowerBound, pagesBackward } from "./shared.js";

/** Items of `items` whose id lies in [from, through]; runs passed together are disjoint and ordered. */
export interface Run<T> {
  readonly items: readonly T[];
  readonly from: Id;
  readonly through: Id;
}

interface Range<T> {
  readonly items: readonly T[];
  readonly start: number;
  readonly end: number;
}

function* ascending<T>(ranges: readonly Range<T>[]): Generator<T> {
  for (const r of ranges) for (let i = r.start; i < r.end; i++) yield r.items[i] as T;
}

function* descending<T>(ranges: readonly Range<T>[]): Generator<T> {
  for (let k = ranges.length - 1; k >= 0; k--) {
    const r = ranges[k] as Range<T>;
    for (let i = r.end - 1; i >= r.start; i--) yield r.items[i] as T;
  }
}

/** One page over `runs`, keeping only items for which `keep` holds (filters apply before the limit). */
export function pageRuns<T>(
  runs: readonly Run<T>[],
  idOf: (item: T) => Id,
  cursor: Cursor,
  readAt: Id,
  keep: (item: T) => boolean = () => true,
): Page<T> {
  checkCursor(cursor);
  const low = (cursor.after ?? -1) + 1;
  const high = (cursor.before ?? Number.MAX_SAFE_INTEGER) - 1;
  const ranges: Range<T>[] = [];
  for (const run of runs) {
    const from = Math.max(run.from, low);
    const through = Math.min(run.through, high);
    if (from > through || run.items.length === 0) continue;
    const start = lowerBound(run.items, idOf, from);
    const end = lowerBound(run.items, idOf, through + 1);
    if (start < end) ranges.push({ items: run.items, start, end });
  }
  const backward = pagesBackward(cursor);
  const items: T[] = [];
  let more = false;
  for (const item of backward ? descending(ranges) : ascending(ranges)) {
    if (!keep(item)) continue;
    if (items.length === cursor.limit) {
      more = true;
      break;
    }
    items.push(item);
  }
  if (backward) items.reverse();
  const edge = backward ? items[0] : items[items.length - 1];
  return more && edge !== undefined ? { items, next: idOf(edge), readAt } : { items, readAt };
}

/** Remove `value` from an ascending array of numbers, if present. */
export function removeSorted(sorted: number[], value: number): void {
  const i = lowerBound(sorted, identity, value);
  if (sorted[i] === value) sorted.splice(i, 1);
}

export function identity(id: Id): Id {
  return id;
}
