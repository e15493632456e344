/**
 * Values and lists of the in-memory backends (§4, §7.4), used by `MemoryState`. Sticky, session and
 * scratch state keeps only current contents; rewindable conversation state keeps every version, every
 * list append and clear/remove markers per conversation, and reads combine fork segments (§4.4) by
 * binary search per segment, so a read costs fork depth plus the requested range.
 */
import type { Address, Element, Id, JsonValue, ListQuery, Page, Scope, StateWrite, Version } from "./records.js";
import { StorageError } from "./storage.js";
import type { Segment } from "./shared.js";
import {
  addressKey,
  frozenCopy,
  historicalReadError,
  keepsHistory,
  lowerBound,
  MAX_PAGE_LIMIT,
  pageOf,
  scopeId,
  scopeTag,
} from "./shared.js";
import { pageRuns, type Run } from "./memory-paging.js";

/** A rewindable value's version; `version` undefined is a deletion (absence recorded). */
interface VersionRecord {
  readonly seq: Id;
  readonly version: Version<JsonValue> | undefined;
}

/** A rewindable list in one conversation: appends are never removed physically; markers hide them. */
interface RewindList {
  readonly appends: Element<JsonValue>[];
  readonly clears: Id[];
  /** Element id -> ascending seqs of the remove markers naming it (usually one). */
  readonly removes: Map<Id, Id[]>;
}

/** Current values of one (scope, namespace), ordered by scan key for `scanValues`. */
interface ValueGroup {
  /** Sorted by (key, address key); the address key breaks the tie between key "" and no key. */
  readonly order: { readonly key: string; readonly ak: string }[];
  readonly values: Map<string, Version<JsonValue>>;
}

interface ScratchIndex {
  readonly groups: Set<string>;
  readonly lists: Set<string>;
}

const bySeq = (r: { readonly seq: Id }): Id => r.seq;
const byId = (e: { readonly id: Id }): Id => e.id;

function groupKey(scope: Scope, namespace: string): string {
  return JSON.stringify([scopeTag(scope), scopeId(scope), namespace]);
}

function compareOrder(a: { key: string; ak: string }, b: { key: string; ak: string }): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.ak < b.ak ? -1 : a.ak > b.ak ? 1 : 0;
}

function checkAt(at: Id | undefined): void {
  if (at !== undefined && !(Number.isSafeInteger(at) && at >= 0)) {
    throw new StorageError("bad_query", `at must be a non-negative integer entry id, got ${String(at)}`);
  }
}

/** The same address in another conversation of a fork chain. */
function inConversation(addr: Address, conversationId: Id): Address {
  return { scope: { conversation: conversationId }, namespace: addr.namespace, key: addr.key, rewind: addr.rewind };
}

export class StateStore {
  readonly #groups = new Map<string, ValueGroup>();
  readonly #history = new Map<string, VersionRecord[]>();
  readonly #lists = new Map<string, Element<JsonValue>[]>();
  readonly #rewindLists = new Map<string, RewindList>();
  readonly #scratch = new Map<Id, ScratchIndex>();

  /** Apply one checked state write at `seq`; `payload` is the JSON text checkBatch produced. */
  apply(w: StateWrite, seq: Id, payload: string | undefined): void {
    const ak = addressKey(w.addr);
    if ("scratch" in w.addr.scope) this.#noteScratch(w.addr.scope.scratch, w);
    switch (w.type) {
      case "value.set": {
        const version: Version<JsonValue> = Object.freeze({ seq, value: frozenCopy<JsonValue>(payload as string) });
        if (keepsHistory(w.addr)) this.#versions(ak).push(Object.freeze({ seq, version }));
        this.#setCurrent(w.addr, ak, version);
        return;
      }
      case "value.delete":
        if (keepsHistory(w.addr)) this.#versions(ak).push(Object.freeze({ seq, version: undefined }));
        this.#setCurrent(w.addr, ak, undefined);
        return;
      case "list.append": {
        const element: Element<JsonValue> = Object.freeze({ id: seq, value: frozenCopy<JsonValue>(payload as string) });
        if (keepsHistory(w.addr)) this.#rewindList(ak).appends.push(element);
        else this.#currentList(ak).push(element);
        return;
      }
      case "list.remove":
        if (keepsHistory(w.addr)) {
          const removes = this.#rewindList(ak).removes;
          const seqs = removes.get(w.element);
          if (seqs === undefined) removes.set(w.element, [seq]);
          else seqs.push(seq);
        } else {
          // Sticky state exposes only current contents: discard the element physically (§4.2).
          const list = this.#lists.get(ak);
          if (list !== undefined) {
            const i = lowerBound(list, byId, w.element);
            if (list[i]?.id === w.element) list.splice(i, 1);
          }
        }
        return;
      case "list.clear":
        if (keepsHistory(w.addr)) this.#rewindList(ak).clears.push(seq);
        else this.#lists.delete(ak);
        return;
      default: {
        const _: never = w;
        throw new Error(`unknown state write ${String(_)}`);
      }
    }
  }

  /** Settlement retires a task's scratch scope in the same commit (§4.6). */
  retireScratch(taskId: Id): void {
    const index = this.#scratch.get(taskId);
    if (index === undefined) return;
    for (const g of index.groups) this.#groups.delete(g);
    for (const l of index.lists) this.#lists.delete(l);
    this.#scratch.delete(taskId);
  }

  getValue(addr: Address, at: Id | undefined, lookup: (at: Id) => Segment[]): Version<JsonValue> | undefined {
    checkAt(at);
    if (!keepsHistory(addr)) {
      if (at !== undefined) throw historicalReadError(addr);
      return this.#groups.get(groupKey(addr.scope, addr.namespace))?.values.get(addressKey(addr));
    }
    // §4.4: nearest segment first; a local version (set or delete) ends the lookup.
    for (const segment of lookup(at ?? Number.MAX_SAFE_INTEGER)) {
      const versions = this.#history.get(addressKey(inConversation(addr, segment.conversationId)));
      if (versions === undefined) continue;
      const i = lowerBound(versions, bySeq, segment.cap + 1) - 1;
      if (i >= 0) return (versions[i] as VersionRecord).version;
    }
    return undefined;
  }

  scanValues(
    scope: Scope,
    namespace: string,
    after: string | undefined,
    limit: number,
    readAt: Id,
  ): Page<{ key: string; version: Version<JsonValue> }> {
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
      throw new StorageError("bad_query", `limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got ${String(limit)}`);
    }
    if (after !== undefined && typeof after !== "string")
      throw new StorageError("bad_query", "after must be a key string");
    const group = this.#groups.get(groupKey(scope, namespace));
    if (group === undefined) return { items: [], readAt };
    let lo = 0;
    if (after !== undefined) {
      let hi = group.order.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((group.order[mid] as { key: string }).key <= after) lo = mid + 1;
        else hi = mid;
      }
    }
    const items = group.order
      .slice(lo, lo + limit)
      .map(({ key, ak }) => ({ key, version: group.values.get(ak) as Version<JsonValue> }));
    return { items, readAt };
  }

  readList(addr: Address, q: ListQuery, readAt: Id, lookup: (at: Id) => Segment[]): Page<Element<JsonValue>> {
    checkAt(q.at);
    const cursor = { after: q.after, before: q.before, limit: q.limit };
    if (!keepsHistory(addr)) {
      if (q.at !== undefined) throw historicalReadError(addr);
      return pageOf(this.#lists.get(addressKey(addr)) ?? [], byId, cursor, readAt);
    }
    const segments = lookup(q.at ?? Number.MAX_SAFE_INTEGER);
    const lists = segments.map((s) => this.#rewindLists.get(addressKey(inConversation(addr, s.conversationId))));
    // The newest clear visible from any segment hides every element below it, inherited ones included.
    let cleared = 0;
    segments.forEach((s, k) => {
      const clears = lists[k]?.clears;
      if (clears === undefined) return;
      const i = lowerBound(clears, (c) => c, s.cap + 1) - 1;
      if (i >= 0) cleared = Math.max(cleared, clears[i] as Id);
    });
    const runs: Run<Element<JsonValue>>[] = [];
    for (let k = segments.length - 1; k >= 0; k--) {
      const list = lists[k];
      if (list !== undefined)
        runs.push({ items: list.appends, from: cleared + 1, through: (segments[k] as Segment).cap });
    }
    const visible = (e: Element<JsonValue>): boolean =>
      segments.every((s, k) => {
        const seqs = lists[k]?.removes.get(e.id);
        return seqs === undefined || (seqs[0] as Id) > s.cap;
      });
    return pageRuns(runs, byId, cursor, readAt, visible);
  }

  #versions(ak: string): VersionRecord[] {
    let versions = this.#history.get(ak);
    if (versions === undefined) this.#history.set(ak, (versions = []));
    return versions;
  }

  #rewindList(ak: string): RewindList {
    let list = this.#rewindLists.get(ak);
    if (list === undefined) this.#rewindLists.set(ak, (list = { appends: [], clears: [], removes: new Map() }));
    return list;
  }

  #currentList(ak: string): Element<JsonValue>[] {
    let list = this.#lists.get(ak);
    if (list === undefined) this.#lists.set(ak, (list = []));
    return list;
  }

  #setCurrent(addr: Address, ak: string, version: Version<JsonValue> | undefined): void {
    const gk = groupKey(addr.scope, addr.namespace);
    let group = this.#groups.get(gk);
    if (group === undefined) {
      if (version === undefined) return;
      this.#groups.set(gk, (group = { order: [], values: new Map() }));
    }
    const had = group.values.has(ak);
    const slot = { key: addr.key ?? "", ak };
    if (version !== undefined) {
      group.values.set(ak, version);
      if (!had) group.order.splice(this.#orderIndex(group, slot), 0, slot);
      return;
    }
    if (!had) return;
    group.values.delete(ak);
    group.order.splice(this.#orderIndex(group, slot), 1);
    if (group.values.size === 0) this.#groups.delete(gk);
  }

  #orderIndex(group: ValueGroup, slot: { key: string; ak: string }): number {
    let lo = 0;
    let hi = group.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareOrder(group.order[mid] as { key: string; ak: string }, slot) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #noteScratch(taskId: Id, w: StateWrite): void {
    let index = this.#scratch.get(taskId);
    if (index === undefined) this.#scratch.set(taskId, (index = { groups: new Set(), lists: new Set() }));
    if (w.type === "value.set" || w.type === "value.delete") index.groups.add(groupKey(w.addr.scope, w.addr.namespace));
    else index.lists.add(addressKey(w.addr));
  }
}
