/**
 * The durable section seed (§8.2 "Durable seed, independent of model retention") and the tool folds.
 *
 * `foldSectionState` reconstructs canonical section state through a fork-visible target from managed
 * system entries only: read backwards (indexed kind scan) to the newest baseline, then fold section
 * records forward; a later fold of the same conversation on the same storage object reads only the
 * system entries since the previous one's target. Heads and projection edits play no part, so an omitted historical
 * message never
 * erases its persisted payload/rendered text — an unavailable plugin's instructions survive a
 * compaction that dropped its old baseline.
 *
 * `foldTools` folds the effective pi-ai tool fields of projected system messages (removals before
 * additions, upsert by name); the planner uses it over the current context.
 *
 * Used by the generation kind (seed before hooks, cursor check on the line) and by the planner.
 */
import type { SystemMessage, Tool } from "@earendil-works/pi-ai";
import { isManagedSystem, systemKind, type SectionChange } from "../core/entries.js";
import type { Entry, Id, JsonValue, Message } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";

/** One section of canonical state: durable payload and final rendered text. */
export interface SectionValue {
  readonly key: string;
  readonly value: JsonValue;
  readonly rendered: string;
}

/** Canonical section state + effective tools through a target, folded from managed system entries. */
export interface SectionState {
  readonly sections: readonly SectionValue[];
  /** Tools the managed entries declare, folded from their messages since the newest baseline. */
  readonly tools: readonly Tool[];
  /** Newest managed system entry folded; 0 if none. */
  readonly cursor: Id;
}

/** Backward page size: a baseline is usually close to the tip. */
const BACK_PAGE = 128;

export const EMPTY_SECTION_STATE: SectionState = Object.freeze({
  sections: Object.freeze([]),
  tools: Object.freeze([]),
  cursor: 0,
});

/** The section records of a managed system entry (stored data is trusted after wire validation). */
export function sectionChanges(entry: Entry): readonly SectionChange[] {
  const data = entry.data as { sections?: unknown } | null | undefined;
  const sections = data?.sections;
  return Array.isArray(sections) ? (sections as readonly SectionChange[]) : [];
}

export function isBaselineEntry(entry: Entry): boolean {
  if (!isManagedSystem(entry)) return false;
  return (entry.data as { baseline?: unknown }).baseline === true;
}

/**
 * What a fold already read, per storage object and conversation: the managed entries since the newest
 * baseline through `upTo`. `upTo` was at or below the storage's lastSeq when read, and entries are
 * immutable and minted above lastSeq, so nothing can join that range later (§3.1, §2.1): a later fold at
 * or above `upTo` reads only the system entries after it. Without this, every fold walked back to the
 * newest baseline, past every head-only system entry (each collapse adds one), so reads grew with
 * history. A fresh storage object (a reopen) starts empty; bounded per storage object.
 */
interface Folded {
  readonly upTo: Id;
  readonly managed: readonly Entry[];
}
const folded = new WeakMap<Storage, Map<Id, Folded>>();
const FOLDED_CONVERSATIONS = 256;

function remember(storage: Storage, conversationId: Id, state: Folded): void {
  let byConversation = folded.get(storage);
  if (byConversation === undefined) {
    byConversation = new Map();
    folded.set(storage, byConversation);
  }
  byConversation.delete(conversationId);
  if (byConversation.size >= FOLDED_CONVERSATIONS) {
    const oldest = byConversation.keys().next();
    if (oldest.done !== true) byConversation.delete(oldest.value);
  }
  byConversation.set(conversationId, state);
}

/**
 * Managed system entries from the newest baseline (inclusive) through `through`, in transcript order.
 * Fork-aware through scanEntries. With no baseline, every managed entry through the target. Continues
 * from what an earlier fold of the same conversation read when its target is at or below this one.
 */
async function managedSinceBaseline(storage: Storage, conversationId: Id, through: Id): Promise<Entry[]> {
  if (through <= 0) return [];
  // Complete at `through` only if nothing at or below it can still be committed.
  const complete = through <= storage.lastSeq;
  const known = folded.get(storage)?.get(conversationId);
  const managed =
    known !== undefined && known.upTo <= through
      ? await managedAfter(storage, conversationId, known, through)
      : await walkBack(storage, conversationId, through);
  if (complete) remember(storage, conversationId, { upTo: through, managed: Object.freeze([...managed]) });
  return managed;
}

/** `known` folded forward over the system entries after its `upTo` through `through`. */
async function managedAfter(storage: Storage, conversationId: Id, known: Folded, through: Id): Promise<Entry[]> {
  let managed = [...known.managed];
  let after = known.upTo;
  if (after >= through) return managed;
  for (;;) {
    const page = await storage.scanEntries({ conversationId, kind: systemKind.kind, after, through, limit: BACK_PAGE });
    for (const entry of page.items) {
      if (!isManagedSystem(entry)) continue;
      if (isBaselineEntry(entry)) managed = [];
      managed.push(entry);
    }
    if (page.next === undefined) return managed;
    after = page.next;
  }
}

/** Read backwards (indexed kind scan) from `through` to the newest baseline. */
async function walkBack(storage: Storage, conversationId: Id, through: Id): Promise<Entry[]> {
  const newestFirst: Entry[] = [];
  let before = through + 1;
  for (;;) {
    const page = await storage.scanEntries({
      conversationId,
      kind: systemKind.kind,
      through,
      before,
      limit: BACK_PAGE,
    });
    for (let i = page.items.length - 1; i >= 0; i--) {
      const entry = page.items[i] as Entry;
      if (!isManagedSystem(entry)) continue;
      newestFirst.push(entry);
      if (isBaselineEntry(entry)) return newestFirst.reverse();
    }
    if (page.next === undefined) return newestFirst.reverse();
    before = page.next;
  }
}

/**
 * The newest managed system entry id at or below `through` (0 if none): the section-state cursor a
 * preparation's seed must still match on the line. Head-only changes do not move it.
 */
export async function sectionCursor(storage: Storage, conversationId: Id, through: Id): Promise<Id> {
  const managed = await managedSinceBaseline(storage, conversationId, through);
  return managed[managed.length - 1]?.id ?? 0;
}

/** Fold managed entries (transcript order, starting at a baseline or the transcript start). */
export function foldManaged(entries: readonly Entry[]): SectionState {
  let sections = new Map<string, SectionValue>();
  const tools = new Map<string, Tool>();
  let cursor: Id = 0;
  for (const entry of entries) {
    if (!isManagedSystem(entry)) continue;
    cursor = entry.id;
    if (isBaselineEntry(entry)) {
      sections = new Map();
      tools.clear();
    }
    for (const change of sectionChanges(entry)) {
      switch (change.action) {
        case "set":
          // Map.set keeps an existing key's position: set replaces in place, a new key appends.
          sections.set(change.key, Object.freeze({ key: change.key, value: change.value, rendered: change.rendered }));
          break;
        case "remove":
          sections.delete(change.key);
          break;
        default: {
          const _exhaustive: never = change;
          throw new Error(`unknown section action ${String((_exhaustive as { action: unknown }).action)}`);
        }
      }
    }
    applyToolFields(tools, entry.model ?? []);
  }
  return Object.freeze({
    sections: Object.freeze([...sections.values()]),
    tools: Object.freeze([...tools.values()]),
    cursor,
  });
}

/** Canonical section state and managed tools of `conversationId` through `through` (inclusive). */
export async function foldSectionState(storage: Storage, conversationId: Id, through: Id): Promise<SectionState> {
  if (!Number.isSafeInteger(through) || through < 0)
    throw new RangeError(`section fold target must be a non-negative integer, got ${String(through)}`);
  const entries = await managedSinceBaseline(storage, conversationId, through);
  return entries.length === 0 ? EMPTY_SECTION_STATE : foldManaged(entries);
}

/** Apply the tool fields of system messages to a name -> definition map: removals before additions. */
export function applyToolFields(tools: Map<string, Tool>, messages: readonly Message[]): void {
  for (const message of messages) {
    if (message.role !== "system") continue;
    const system = message as SystemMessage;
    for (const removed of system.toolsRemoved ?? []) tools.delete(removed.name);
    for (const added of system.toolsAdded ?? []) tools.set(added.name, added);
  }
}

/** Effective tools declared by a sequence of projected message lists, in order. */
export function foldTools(projections: Iterable<readonly Message[]>): Map<string, Tool> {
  const tools = new Map<string, Tool>();
  for (const messages of projections) applyToolFields(tools, messages);
  return tools;
}
