/**
 * The conversation handle's process-local context cache (§2.2, §8.2 "Frozen request cutoff and
 * cache"). It keeps the fold of the current context — H, the candidate range since H's boundary and
 * the winning edits — and hands out immutable snapshots.
 *
 * Lifecycle:
 * - The first `contextEntries()` loads it cold from storage at `storage.lastSeq` (fork depth + the
 *   candidate range since the newest head).
 * - The commit line then calls `observe(entries, last)` after each durable batch. The cache folds the
 *   entries of its own conversation (a forked source's later entries are never visible to it) and
 *   advances its cursor to `last`; no storage read happens. A new head slices the range at its
 *   boundary. Batches the cold load already saw (ids at or below the cursor) are ignored, so the commit
 *   line may deliver a batch that landed while the load was reading.
 * - `contextEntries(through)` for `through` below the cursor is a historical target: it is derived
 *   separately from storage and does not rewind the cache. A target above the cursor but already
 *   committed means the observer has not delivered yet; the cache reads just the entries after its
 *   cursor (bounded by what was appended) instead of answering stale.
 *
 * The transcript is the truth: the cache may be dropped at any time and reloads on the next call.
 */
import type { Entry, Id } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import { checkTarget, deriveContext, loadFold } from "./context-derive.js";
import type { ContextFold, DerivedContext } from "./context-fold.js";

/** What the cache did, for tests and benchmarks; only ever increases. */
export interface ContextCacheStats {
  /** Cold loads of the live cache. */
  readonly loads: number;
  /** Historical targets derived separately. */
  readonly historical: number;
  /** Entries folded from `observe`. */
  readonly observed: number;
  /** Catch-up reads for a target beyond the cursor that the observer had not delivered yet. */
  readonly gapReads: number;
  /** Times a head moved the boundary backwards and the cache had to be dropped. */
  readonly rewinds: number;
}

const PAGE = 1000;

export class ContextCache {
  readonly #storage: Storage;
  readonly #conversationId: Id;
  #fold: ContextFold | undefined;
  /** Last sequence the fold accounts for; meaningful only while #fold is set. */
  #cursor: Id = 0;
  /**
   * No entry of this conversation in the fold is newer than this (the load tip, then each folded
   * entry): a target in [#settled, #cursor) sees exactly the live fold, so it is answered from it.
   */
  #settled: Id = 0;
  /** Batches observed while an asynchronous operation was running; applied when it finishes. */
  #pending: { readonly entries: readonly Entry[]; readonly last: Id }[] = [];
  #busy = false;
  #tail: Promise<unknown> = Promise.resolve();
  #stats = { loads: 0, historical: 0, observed: 0, gapReads: 0, rewinds: 0 };

  constructor(storage: Storage, conversationId: Id) {
    this.#storage = storage;
    this.#conversationId = conversationId;
  }

  get conversationId(): Id {
    return this.#conversationId;
  }

  /** The last sequence the live cache accounts for, or undefined before the first load. */
  get cursor(): Id | undefined {
    return this.#fold === undefined ? undefined : this.#cursor;
  }

  get stats(): ContextCacheStats {
    return { ...this.#stats };
  }

  /**
   * The context at `through` (default: the newest position the cache knows, loading it if needed).
   * Every result is an immutable snapshot that later updates never touch.
   */
  contextEntries(through?: Id): Promise<DerivedContext> {
    if (through !== undefined) checkTarget(through);
    const run = this.#tail.then(() => this.#contextEntries(through));
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Feed one durable batch: its entries (any conversation, transcript order) and `last`, the batch's
   * last sequence (default: its newest entry id). Call after every committed batch, in commit order,
   * including batches without entries of this conversation, so the cursor tracks the session tip.
   * Synchronous and read-free.
   */
  observe(entries: readonly Entry[], last?: Id): void {
    let newest = last ?? 0;
    for (const entry of entries) newest = Math.max(newest, entry.id);
    if (this.#fold === undefined && !this.#busy) return; // the next load reads them from storage
    if (this.#busy) {
      this.#pending.push({ entries, last: newest });
      return;
    }
    this.#apply(entries, newest);
  }

  /** Drop the cached fold; the next call loads cold. */
  clear(): void {
    this.#fold = undefined;
    this.#pending = [];
  }

  async #contextEntries(through: Id | undefined): Promise<DerivedContext> {
    this.#busy = true;
    try {
      const fold = await this.#ensure(through);
      if (fold === undefined) {
        // Historical target with no live cache: derive separately; loading at the tip would not help.
        this.#stats.historical++;
        return await deriveContext(this.#storage, this.#conversationId, through as Id);
      }
      const target = through ?? this.#cursor;
      if (target < this.#cursor && target >= this.#settled) {
        // Nothing of this conversation landed after `target` (only task or state writes did, e.g. the
        // generation's own streaming patch after its requestThrough): the fold is the context there.
        return fold.snapshot(this.#conversationId, target);
      }
      if (target < this.#cursor) {
        this.#stats.historical++;
        return await deriveContext(this.#storage, this.#conversationId, target);
      }
      if (target > this.#cursor) await this.#readGap(target);
      const current = this.#fold;
      if (current === undefined) {
        // A rewinding head arrived while reading; the derivation rule still answers from storage.
        return await deriveContext(this.#storage, this.#conversationId, target);
      }
      return current.snapshot(this.#conversationId, target);
    } finally {
      this.#busy = false;
      this.#drain();
    }
  }

  /** The live fold, loading it at the storage tip when absent; undefined if `through` is older. */
  async #ensure(through: Id | undefined): Promise<ContextFold | undefined> {
    if (this.#fold !== undefined) return this.#fold;
    const tip = this.#storage.lastSeq;
    if (through !== undefined && through < tip) return undefined;
    this.#pending = [];
    const fold = await loadFold(this.#storage, this.#conversationId, tip);
    this.#stats.loads++;
    this.#fold = fold;
    this.#cursor = tip;
    this.#settled = tip;
    this.#drain();
    return this.#fold;
  }

  /** Read the entries in (cursor, target] that the observer has not delivered yet. */
  async #readGap(target: Id): Promise<void> {
    if (target > this.#storage.lastSeq) {
      throw new RangeError(`context target ${target} is beyond the last committed sequence ${this.#storage.lastSeq}`);
    }
    this.#stats.gapReads++;
    let after: Id = this.#cursor;
    const found: Entry[] = [];
    for (;;) {
      const page = await this.#storage.scanEntries({
        conversationId: this.#conversationId,
        through: target,
        after,
        limit: PAGE,
      });
      found.push(...page.items);
      if (page.next === undefined) break;
      after = page.next;
    }
    // Deliveries that arrived during the read are pending and drain afterwards; the ones at or below
    // `target` are then skipped by id, newer ones apply on top.
    this.#apply(found, target);
  }

  #drain(): void {
    const pending = this.#pending;
    this.#pending = [];
    for (const batch of pending) this.#apply(batch.entries, batch.last);
  }

  #apply(entries: readonly Entry[], last: Id): void {
    const fold = this.#fold;
    if (fold === undefined) return;
    for (const entry of entries) {
      if (entry.id <= this.#cursor || entry.conversationId !== this.#conversationId) continue;
      this.#stats.observed++;
      this.#settled = Math.max(this.#settled, entry.id);
      if (fold.add(entry) === "rewind") {
        this.#stats.rewinds++;
        this.clear();
        return;
      }
    }
    this.#cursor = Math.max(this.#cursor, last);
  }
}
