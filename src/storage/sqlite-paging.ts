/**
 * Cursor paging (see `Cursor` in records.ts) built from indexed LIMIT queries, for `SqliteStorage`.
 * A fork-aware read is one range per fork segment (§2.4); the ranges are disjoint and ascending, so a page
 * walks them in order and stops as soon as it has `limit + 1` rows (the extra one says whether `next`
 * exists). Every query is an index range with its filters in SQL, so filters apply before the limit and
 * only the page's rows are decoded. Semantics equal `pageOf` in shared.ts.
 */
import type { Cursor, Id, Page } from "./records.js";
import { checkCursor, pagesBackward } from "./shared.js";

/** Inclusive id bounds of one range; ranges passed together are disjoint and ascending. */
export interface Part {
  readonly from: Id;
  readonly through: Id;
}

/** Up to `limit` rows of `part` with ids in [from, through], ascending or descending. */
export type Fetch<P, T> = (part: P, from: Id, through: Id, descending: boolean, limit: number) => T[];

export function pageParts<P extends Part, T>(
  parts: readonly P[],
  fetch: Fetch<P, T>,
  idOf: (item: T) => Id,
  cursor: Cursor,
  readAt: Id,
): Page<T> {
  checkCursor(cursor);
  const low = (cursor.after ?? -1) + 1;
  const high = (cursor.before ?? Number.MAX_SAFE_INTEGER + 1) - 1;
  const backward = pagesBackward(cursor);
  const want = cursor.limit + 1;
  const rows: T[] = [];
  const order = backward ? [...parts].reverse() : parts;
  for (const part of order) {
    const from = Math.max(part.from, low);
    const through = Math.min(part.through, high);
    if (from > through) continue;
    rows.push(...fetch(part, from, through, backward, want - rows.length));
    if (rows.length >= want) break;
  }
  return finish(rows, idOf, cursor.limit, backward, readAt);
}

/**
 * Paging over several overlapping sources (an id list split into chunks): each source is asked for
 * `limit + 1` rows in page order and the union is merged by id.
 */
export function pageMerged<T>(
  sources: readonly ((from: Id, through: Id, descending: boolean, limit: number) => T[])[],
  idOf: (item: T) => Id,
  cursor: Cursor,
  readAt: Id,
): Page<T> {
  checkCursor(cursor);
  const from = (cursor.after ?? -1) + 1;
  const through = (cursor.before ?? Number.MAX_SAFE_INTEGER + 1) - 1;
  const backward = pagesBackward(cursor);
  const want = cursor.limit + 1;
  const rows: T[] = [];
  if (from <= through) for (const source of sources) rows.push(...source(from, through, backward, want));
  rows.sort((a, b) => (backward ? idOf(b) - idOf(a) : idOf(a) - idOf(b)));
  return finish(rows.slice(0, want), idOf, cursor.limit, backward, readAt);
}

/** `rows` are in page order (descending when paging backward) and hold at most limit + 1 items. */
function finish<T>(rows: T[], idOf: (item: T) => Id, limit: number, backward: boolean, readAt: Id): Page<T> {
  const more = rows.length > limit;
  const items = rows.slice(0, limit);
  if (backward) items.reverse();
  const edge = backward ? items[0] : items[items.length - 1];
  return more && edge !== undefined ? { items, next: idOf(edge), readAt } : { items, readAt };
}
