/**
 * Entry tails of `SqliteStorage` (docs/performance.md): a write-through cache of each conversation's own newest
 * entries, so scans of recently committed entries read no rows. The storage's write path fills it after
 * a commit's transaction (sqlite-write.ts); its entry reads consult it before SQLite (sqlite.ts).
 */
import type { Entry, Id } from "./records.js";
import type { SqlRow } from "./sql.js";

/** Conversations with an entry tail; the one touched longest ago is dropped first. */
const TAIL_CONVERSATIONS = 1024;

/** An entry of a tail: its row as SQLite returns it until first read, then the decoded record. */
interface TailEntry {
  readonly id: Id;
  readonly kind: number;
  readonly key: string | undefined;
  row: SqlRow | undefined;
  entry: Entry | undefined;
  readonly tail: EntryTail;
}

/**
 * Write-through cache of a conversation's own newest entries: every entry of the conversation
 * with an id above `floor` is in `entries` (ascending), because this object committed all of them. A
 * tail starts at a commit that creates the conversation or appends its entries (floor: below that
 * commit); evicting its oldest entry raises the floor. Scans of ids above the floor read no rows.
 */
export interface EntryTail {
  readonly conversationId: Id;
  floor: Id;
  readonly entries: TailEntry[];
}

/** The index of the first item with an id at or above `id` in an ascending list. */
function lowerIndex(items: readonly { readonly id: Id }[], id: Id): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((items[mid] as { readonly id: Id }).id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Every tail of one storage object, bounded to `entryCache` entries in all. */
export class EntryTails {
  /** Entry tails by conversation (least recently appended first) and their entries by id (oldest first). */
  readonly #tails = new Map<Id, EntryTail>();
  readonly #tailEntries = new Map<Id, TailEntry>();
  readonly #entryCache: number;
  readonly #decode: (row: SqlRow) => Entry;

  constructor(entryCache: number, decode: (row: SqlRow) => Entry) {
    this.#entryCache = entryCache;
    this.#decode = decode;
  }

  /** The conversation's tail, if it has one (does not count as touching it). */
  of(conversationId: Id): EntryTail | undefined {
    return this.#tails.get(conversationId);
  }

  has(id: Id): boolean {
    return this.#tailEntries.has(id);
  }

  /** A cached entry by id, decoded on first read. */
  entry(id: Id): Entry | undefined {
    const cached = this.#tailEntries.get(id);
    return cached === undefined ? undefined : this.#tailEntry(cached);
  }

  /** The conversation's tail, started at `floor` when it has none; now the most recently touched. */
  tail(conversationId: Id, floor: Id): EntryTail {
    let tail = this.#tails.get(conversationId);
    if (tail === undefined) {
      tail = { conversationId, floor, entries: [] };
      if (this.#tails.size >= TAIL_CONVERSATIONS) {
        const oldest = this.#tails.values().next();
        if (oldest.done !== true) this.#dropTail(oldest.value);
      }
    } else {
      this.#tails.delete(conversationId);
    }
    this.#tails.set(conversationId, tail);
    return tail;
  }

  #dropTail(tail: EntryTail): void {
    this.#tails.delete(tail.conversationId);
    for (const cached of tail.entries) this.#tailEntries.delete(cached.id);
  }

  append(tail: EntryTail, id: Id, kind: number, key: string | undefined, row: SqlRow): void {
    const cached: TailEntry = { id, kind, key, row, entry: undefined, tail };
    tail.entries.push(cached);
    this.#tailEntries.set(id, cached);
    // Entries are published in sequence order, so the oldest cached entry heads its own tail.
    while (this.#tailEntries.size > this.#entryCache) {
      const oldest = this.#tailEntries.values().next();
      if (oldest.done === true) break;
      const evicted = oldest.value;
      this.#tailEntries.delete(evicted.id);
      evicted.tail.entries.shift();
      evicted.tail.floor = evicted.id;
    }
  }

  #tailEntry(cached: TailEntry): Entry {
    if (cached.entry === undefined) {
      cached.entry = this.#decode(cached.row as SqlRow);
      cached.row = undefined;
    }
    return cached.entry;
  }

  /**
   * Up to `limit` entries of `tail` with ids in [from, through] (all above its floor) matching kind and
   * key, ascending or descending: what the indexed range query would return.
   */
  read(
    tail: EntryTail,
    from: Id,
    through: Id,
    kind: number | undefined,
    key: string | undefined,
    descending: boolean,
    limit: number,
  ): Entry[] {
    const out: Entry[] = [];
    const entries = tail.entries;
    const match = (c: TailEntry): boolean =>
      (kind === undefined || c.kind === kind) && (key === undefined || c.key === key);
    if (descending) {
      for (let i = entries.length - 1; i >= 0 && out.length < limit; i--) {
        const c = entries[i] as TailEntry;
        if (c.id < from) break;
        if (c.id <= through && match(c)) out.push(this.#tailEntry(c));
      }
    } else {
      for (let i = lowerIndex(entries, from); i < entries.length && out.length < limit; i++) {
        const c = entries[i] as TailEntry;
        if (c.id > through) break;
        if (match(c)) out.push(this.#tailEntry(c));
      }
    }
    return out;
  }
}
