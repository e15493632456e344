/**
 * Cold context derivation (§2.2): read the newest visible head at the target, then the fork-aware
 * candidate range from its boundary through the target, and fold it. Cost is fork depth plus the range
 * since the newest head, never unrelated history (§7.2 "Context").
 *
 * Used directly for historical targets (request cutoffs, recovery, forks) and by `ContextCache` for its
 * first load.
 */
import type { Id } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import { ContextFold, type DerivedContext } from "./context-fold.js";

/** Range page size: the storage maximum, so a 500-entry range since the last head is one read. */
const PAGE = 1000;

export function checkTarget(through: Id): void {
  if (!Number.isSafeInteger(through) || through < 0) {
    throw new RangeError(`context target must be a non-negative integer, got ${String(through)}`);
  }
}

/** Load a fold of the context of `conversationId` at `through` from storage. */
export async function loadFold(storage: Storage, conversationId: Id, through: Id): Promise<ContextFold> {
  checkTarget(through);
  const head = await storage.newestHead(conversationId, through);
  const fold = new ContextFold(head);
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanEntries({
      conversationId,
      ...(head === undefined ? {} : { from: head.head }),
      through,
      limit: PAGE,
      ...(after === undefined ? {} : { after }),
    });
    for (const entry of page.items) {
      // The scan is capped at `through`, so no entry here is newer than H: `add` never slices.
      fold.add(entry);
    }
    if (page.next === undefined) break;
    after = page.next;
  }
  return fold;
}

/**
 * The context of `conversationId` at entry position `through` (inclusive), derived from storage.
 * `through` 0 is "before the first entry" (empty context). The result is deeply immutable as far as
 * the context goes: frozen object, frozen item and id arrays, frozen items.
 */
export async function deriveContext(storage: Storage, conversationId: Id, through: Id): Promise<DerivedContext> {
  const fold = await loadFold(storage, conversationId, through);
  return fold.snapshot(conversationId, through);
}
