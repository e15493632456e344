/**
 * The context fold (§2.2): the incremental state behind a derived context. It holds the newest visible
 * head H, the candidate range from H's boundary (non-head entries, transcript order) and the winning
 * edit per target, and turns them into immutable `DerivedContext` snapshots.
 *
 * Used by `deriveContext` (fed a cold range read from storage) and by `ContextCache` (fed appended
 * entries). Both feed entries in transcript order through `add`, so a cold derivation and a warm cache
 * that saw the same entries produce the same context by construction.
 */
import type { ContextEdit, Entry, Id, Message } from "../storage/records.js";

/** One selected context item: the entry and its effective model messages (replacement applied). */
export interface ContextItem {
  readonly entry: Entry;
  readonly messages: readonly Message[];
}

/** An immutable derived context at a target. */
export interface DerivedContext {
  readonly conversationId: Id;
  /** The target (inclusive). */
  readonly through: Id;
  /** Newest visible head H, if any. It sets the boundary even when an edit omits its own messages. */
  readonly head?: Entry;
  /**
   * H first (if any and not omitted), then the eligible range entries in transcript order, excluding
   * every head and every omitted target. An entry without `model` is still an item, with no messages,
   * so the ids show everything the context selected (e.g. a reset head or a data-only system entry).
   */
  readonly items: readonly ContextItem[];
  /** The items' entry ids, same order. */
  readonly ids: readonly Id[];
}

const NO_MESSAGES: readonly Message[] = Object.freeze([]);

/** What `add` did: `"rewind"` means a new head moved the boundary backwards and the fold is unusable. */
export type FoldResult = "ok" | "rewind";

export class ContextFold {
  #head: Entry | undefined;
  /** First retained id: H.head, or 0 for the transcript start. */
  #from: Id;
  /** Newest id added so far; entries must arrive in increasing id order. */
  #newest: Id = 0;
  /** Non-head range entries, ascending ids. */
  readonly #candidates: Entry[] = [];
  /** Winning edit per target id (newest applicable edit folded last). Only targets >= #from are kept. */
  readonly #edits = new Map<Id, ContextEdit>();
  /** Memoized frozen items per entry id, invalidated when that target's winning edit changes. */
  readonly #items = new Map<Id, ContextItem>();
  /** Memoized selection, invalidated by any change; shared by snapshots because it is frozen. */
  #selection: { readonly items: readonly ContextItem[]; readonly ids: readonly Id[] } | undefined;

  /** Start a fold at the newest visible head `head` (none: from the transcript start). */
  constructor(head?: Entry) {
    this.#head = head;
    this.#from = head?.head ?? 0;
  }

  get head(): Entry | undefined {
    return this.#head;
  }

  /** Number of candidate range entries held (not counting H). */
  get size(): number {
    return this.#candidates.length;
  }

  /**
   * Add the next transcript entry of the range (ids strictly increasing). A head newer than H becomes
   * the new H: the range is sliced at its boundary. A head no newer than H (H itself, or an older head
   * met while scanning H's range) is only a control: its edits fold, it is never a candidate.
   */
  add(entry: Entry): FoldResult {
    if (entry.id <= this.#newest) {
      throw new RangeError(`context fold: entry ${entry.id} is not after ${this.#newest}`);
    }
    this.#newest = entry.id;
    if (entry.head !== undefined && entry.id > (this.#head?.id ?? 0)) {
      // The commit line guarantees newHead.head >= previous head's boundary (§2.1). If stored data
      // breaks that, the entries before the old boundary are not here; the caller must derive cold.
      if (entry.head < this.#from) return "rewind";
      this.#slice(entry);
    } else if (entry.id < this.#from) {
      // Before the boundary (a cold scan never yields these; kept for robustness): not in range.
      return "ok";
    } else if (entry.head === undefined) {
      this.#candidates.push(entry);
      this.#selection = undefined;
    }
    this.#foldEdits(entry);
    return "ok";
  }

  /** The immutable context at `through`; later `add` calls never mutate what this returns. */
  snapshot(conversationId: Id, through: Id): DerivedContext {
    const selection = this.#select();
    const derived: DerivedContext =
      this.#head === undefined
        ? { conversationId, through, items: selection.items, ids: selection.ids }
        : { conversationId, through, head: this.#head, items: selection.items, ids: selection.ids };
    return Object.freeze(derived);
  }

  #slice(head: Entry): void {
    const from = head.head as Id;
    this.#head = head;
    this.#from = from;
    let drop = 0;
    while (drop < this.#candidates.length && (this.#candidates[drop] as Entry).id < from) drop++;
    for (const dropped of this.#candidates.splice(0, drop)) this.#items.delete(dropped.id);
    for (const target of [...this.#edits.keys()]) {
      if (target < from) {
        this.#edits.delete(target);
        this.#items.delete(target);
      }
    }
    this.#selection = undefined;
  }

  #foldEdits(entry: Entry): void {
    for (const edit of entry.edits ?? []) {
      // An edit whose target is outside the selected range is a no-op (§2.1). Targets are always
      // earlier than the edit, so only the lower bound needs a check here; a target that is in range
      // but not a candidate (a head, an invisible id) is harmless: selection reads candidates only.
      if (edit.target < this.#from) continue;
      this.#edits.set(edit.target, edit);
      this.#items.delete(edit.target);
      this.#selection = undefined;
    }
  }

  #select(): { readonly items: readonly ContextItem[]; readonly ids: readonly Id[] } {
    if (this.#selection !== undefined) return this.#selection;
    const items: ContextItem[] = [];
    if (this.#head !== undefined) this.#pick(this.#head, items);
    for (const entry of this.#candidates) this.#pick(entry, items);
    this.#selection = Object.freeze({
      items: Object.freeze(items),
      ids: Object.freeze(items.map((item) => item.entry.id)),
    });
    return this.#selection;
  }

  #pick(entry: Entry, into: ContextItem[]): void {
    const edit = this.#edits.get(entry.id);
    if (edit?.action === "omit") return;
    let item = this.#items.get(entry.id);
    if (item === undefined) {
      const messages = edit?.action === "replace" ? edit.messages : (entry.model ?? NO_MESSAGES);
      // Stored entries come back frozen; entries fed by the commit line may not be. Freeze our own
      // copy of the array (not the caller's) so a published snapshot's projection cannot change.
      item = Object.freeze({ entry, messages: Object.isFrozen(messages) ? messages : Object.freeze([...messages]) });
      this.#items.set(entry.id, item);
    }
    into.push(item);
  }
}
