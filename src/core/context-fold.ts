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
import { lowerBound } from "../storage/shared.js";

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

/**
 * The lineage of each selection array a fold handed out: a token the fold replaces whenever its
 * selection changes other than by appending (a new head, an edit), and the array's length. Two arrays
 * of one lineage are prefix-related: the shorter one's items are the longer one's first items, the
 * same objects.
 */
const lineages = new WeakMap<readonly ContextItem[], { readonly token: object; readonly length: number }>();

/**
 * True when `next` is known, without comparing items, to start with exactly the items of `previous`
 * (same objects, same order): both came from one context fold with only appends between them. False
 * means unknown (compare the items), not different.
 */
export function extendsItems(previous: readonly ContextItem[], next: readonly ContextItem[]): boolean {
  const a = lineages.get(previous);
  const b = lineages.get(next);
  return a !== undefined && b !== undefined && a.token === b.token && a.length <= b.length;
}

/** What `add` did: `"rewind"` means a new head moved the boundary backwards and the fold is unusable. */
export type FoldResult = "ok" | "rewind";

export class ContextFold {
  #head: Entry | undefined;
  /** H's item, or undefined when there is no H or an edit omits it. */
  #headItem: ContextItem | undefined;
  /** First retained id: H.head, or 0 for the transcript start. */
  #from: Id;
  /** Newest id added so far; entries must arrive in increasing id order. */
  #newest: Id = 0;
  /** Non-head range entries, ascending ids (kept even when omitted: a later edit may replace them). */
  readonly #candidates: Entry[] = [];
  /** Winning edit per target id (newest applicable edit folded last). Only targets >= #from are kept. */
  readonly #edits = new Map<Id, ContextEdit>();
  /** The selected candidates' items and ids, ascending ids, maintained incrementally. */
  readonly #selected: ContextItem[] = [];
  readonly #selectedIds: Id[] = [];
  /** Memoized frozen selection, dropped by any change; shared by snapshots because it is frozen. */
  #selection: { readonly items: readonly ContextItem[]; readonly ids: readonly Id[] } | undefined;
  /** This fold's current lineage (see `lineages`); replaced by every change that is not an append. */
  #lineage: object = {};

  /** Start a fold at the newest visible head `head` (none: from the transcript start). */
  constructor(head?: Entry) {
    this.#head = head;
    this.#headItem = head === undefined ? undefined : itemOf(head, undefined);
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
   * Cost: constant for an ordinary entry; a slice or an edit of a selected entry costs the range.
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
      // No edit can target it yet: edits only target entries older than themselves.
      this.#candidates.push(entry);
      this.#selected.push(itemOf(entry, undefined));
      this.#selectedIds.push(entry.id);
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
    this.#headItem = itemOf(head, undefined); // the newest entry: no edit targets it yet
    this.#from = from;
    this.#candidates.splice(
      0,
      lowerBound(this.#candidates, (e) => e.id, from),
    );
    const drop = lowerBound(this.#selectedIds, (id) => id, from);
    this.#selected.splice(0, drop);
    this.#selectedIds.splice(0, drop);
    for (const target of [...this.#edits.keys()]) if (target < from) this.#edits.delete(target);
    this.#selection = undefined;
    this.#lineage = {};
  }

  #foldEdits(entry: Entry): void {
    for (const edit of entry.edits ?? []) {
      // An edit whose target is outside the selected range is a no-op (§2.1). Targets are always
      // earlier than the edit, so only the lower bound needs a check here; a target that is in range
      // but not a candidate (an older head, an invisible id) selects nothing.
      if (edit.target < this.#from) continue;
      this.#edits.set(edit.target, edit);
      this.#retarget(edit);
    }
  }

  /** Apply the new winning edit of one target to the selection. */
  #retarget(edit: ContextEdit): void {
    const target = edit.target;
    if (target === this.#head?.id) {
      this.#headItem = edit.action === "omit" ? undefined : itemOf(this.#head, edit);
      this.#selection = undefined;
      this.#lineage = {};
      return;
    }
    const c = lowerBound(this.#candidates, (e) => e.id, target);
    const candidate = this.#candidates[c];
    if (candidate?.id !== target) return;
    const s = lowerBound(this.#selectedIds, (id) => id, target);
    const present = this.#selectedIds[s] === target;
    switch (edit.action) {
      case "omit":
        if (present) {
          this.#selected.splice(s, 1);
          this.#selectedIds.splice(s, 1);
        }
        break;
      case "replace":
        if (present) this.#selected[s] = itemOf(candidate, edit);
        else {
          this.#selected.splice(s, 0, itemOf(candidate, edit));
          this.#selectedIds.splice(s, 0, target);
        }
        break;
      default: {
        const _exhaustive: never = edit;
        throw new Error(`unknown edit action ${String((_exhaustive as { action: unknown }).action)}`);
      }
    }
    this.#selection = undefined;
    this.#lineage = {};
  }

  #select(): { readonly items: readonly ContextItem[]; readonly ids: readonly Id[] } {
    if (this.#selection !== undefined) return this.#selection;
    // Copy the selected reference arrays (§2.2): the snapshot owns its arrays, the fold keeps mutating.
    const head = this.#headItem;
    const items = head === undefined ? this.#selected.slice() : [head, ...this.#selected];
    const ids = head === undefined ? this.#selectedIds.slice() : [head.entry.id, ...this.#selectedIds];
    this.#selection = Object.freeze({ items: Object.freeze(items), ids: Object.freeze(ids) });
    lineages.set(this.#selection.items, { token: this.#lineage, length: items.length });
    return this.#selection;
  }
}

/** The frozen item of `entry` under its winning edit (none, or a replacement). */
function itemOf(entry: Entry, edit: ContextEdit | undefined): ContextItem {
  const messages = edit?.action === "replace" ? edit.messages : (entry.model ?? NO_MESSAGES);
  // Stored entries come back frozen; entries fed by the commit line may not be. Freeze our own copy
  // of the array (never the caller's) so a published snapshot's projection cannot change.
  return Object.freeze({ entry, messages: Object.isFrozen(messages) ? messages : Object.freeze([...messages]) });
}
