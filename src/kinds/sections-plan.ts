/**
 * Section planning on the commit line (§8.2 "Head changes and fresh baselines", diffing, tool fold):
 * given the derived context at the tip and a prepared desire, decide nothing / delta / fresh baseline
 * and build the managed system entry to append.
 *
 * - Stale seed: a managed write since the seed's cursor means the preparation must rerun.
 * - Current-epoch baseline = a managed baseline in the context newer than the newest visible head
 *   entry (by entry id, not its retained boundary). With one, diff desired against the seed: a
 *   payload-only change is a data-only delta (model []), rendered changes and removals travel in the
 *   SystemMessage `sections` (text / null), never as appended `content`. Reorder alone is nothing.
 * - Without one, a fresh complete baseline: all sections as set records, the full desired tool set,
 *   explicit removals of unwanted declarations remaining from other system messages, and omission
 *   edits for every retained managed system entry it supersedes (never unrelated notices).
 * - Tools: effective definitions are folded from every projected system message of the context
 *   (managed or not); definitions compare structurally by name; removals carry the previous complete
 *   definition (a pi-ai Tool is a valid ToolReference).
 *
 * Pure: no storage access; the caller supplies the context and the current cursor (`sectionCursor`).
 */
import type { SystemMessage, Tool } from "@earendil-works/pi-ai";
import {
  isManagedSystem,
  systemEntry,
  type EntryInput,
  type SectionChange,
  type SystemEntry,
} from "../core/entries.js";
import type { ContextEdit, Id } from "../storage/records.js";
import type { DerivedContext } from "../core/context.js";
import { sameJson, type PreparedSections } from "./sections-draft.js";
import { foldTools, isBaselineEntry } from "./sections-fold.js";

export type SystemPlan =
  | { readonly stale: true }
  | {
      readonly stale: false;
      readonly draft: EntryInput<SystemEntry> | undefined;
      readonly kind: "none" | "delta" | "baseline";
    };

/** The id of the context's current-epoch baseline, or undefined if it has none. */
export function currentEpochBaseline(context: DerivedContext): Id | undefined {
  const headId = context.head?.id ?? 0;
  let found: Id | undefined;
  for (const item of context.items) {
    if (item.entry.id > headId && isBaselineEntry(item.entry)) found = item.entry.id;
  }
  return found;
}

interface ToolDiff {
  readonly added: Tool[];
  readonly removed: Tool[];
}

/**
 * Diff desired tools against effective ones: upserts for new/changed definitions, removals with the previous
 * definition.
 */
function diffTools(effective: ReadonlyMap<string, Tool>, desired: readonly Tool[]): ToolDiff {
  const wanted = new Set(desired.map((t) => t.name));
  const removed = [...effective.values()].filter((t) => !wanted.has(t.name));
  const added = desired.filter((t) => {
    const previous = effective.get(t.name);
    return previous === undefined || !sameJson(previous, t);
  });
  return { added, removed };
}

function message(
  sections: Record<string, string | null> | undefined,
  tools: ToolDiff,
  timestamp: number,
): SystemMessage | undefined {
  const hasSections = sections !== undefined && Object.keys(sections).length > 0;
  if (!hasSections && tools.added.length === 0 && tools.removed.length === 0) return undefined;
  return {
    role: "system",
    content: "",
    ...(hasSections ? { sections } : {}),
    ...(tools.added.length > 0 ? { toolsAdded: tools.added } : {}),
    ...(tools.removed.length > 0 ? { toolsRemoved: tools.removed } : {}),
    timestamp,
  };
}

/**
 * Decide the managed system entry for a prepared desire at the current tip. `seedCursor` is the cursor
 * the preparation was seeded at, `currentCursor` the section cursor now (on the line).
 */
export function planSystemEntry(args: {
  readonly context: DerivedContext;
  readonly seedCursor: Id;
  readonly currentCursor: Id;
  readonly prepared: PreparedSections;
  readonly timestamp: number;
  /**
   * The context's folds when the caller keeps them incrementally (request-cache.ts): its current-epoch
   * baseline and effective tools, equal to `currentEpochBaseline(context)` and `foldTools` over its items.
   */
  readonly folds?: { readonly baseline: Id | undefined; readonly tools: () => ReadonlyMap<string, Tool> };
}): SystemPlan {
  const { context, prepared, timestamp, folds } = args;
  if (args.currentCursor !== args.seedCursor) return { stale: true };
  const baseline = folds === undefined ? currentEpochBaseline(context) : folds.baseline;
  const effective = folds?.tools ?? ((): ReadonlyMap<string, Tool> => foldTools(context.items.map((i) => i.messages)));
  return baseline === undefined
    ? planBaseline(context, prepared, timestamp)
    : planDelta(effective, prepared, timestamp);
}

function planDelta(
  effective: () => ReadonlyMap<string, Tool>,
  prepared: PreparedSections,
  timestamp: number,
): SystemPlan {
  const seed = new Map(prepared.seed.sections.map((s) => [s.key, s]));
  const desiredKeys = new Set(prepared.sections.map((s) => s.key));
  const changes: SectionChange[] = [];
  const texts: Record<string, string | null> = {};
  for (const section of prepared.sections) {
    const previous = seed.get(section.key);
    const renderedChanged = previous === undefined || previous.rendered !== section.rendered;
    const payloadChanged = previous === undefined || !sameJson(previous.value, section.value);
    if (!renderedChanged && !payloadChanged) continue;
    changes.push({ key: section.key, action: "set", value: section.value, rendered: section.rendered });
    if (renderedChanged) texts[section.key] = section.rendered;
  }
  for (const previous of prepared.seed.sections) {
    if (desiredKeys.has(previous.key)) continue;
    changes.push({ key: previous.key, action: "remove" });
    texts[previous.key] = null;
  }
  const tools = diffTools(effective(), prepared.tools);
  if (changes.length === 0 && tools.added.length === 0 && tools.removed.length === 0) {
    return { stale: false, draft: undefined, kind: "none" };
  }
  const msg = message(texts, tools, timestamp);
  return { stale: false, draft: systemEntry({ sections: changes }, msg), kind: "delta" };
}

function planBaseline(context: DerivedContext, prepared: PreparedSections, timestamp: number): SystemPlan {
  // Supersede every retained managed system entry (old baselines and deltas); notices stay.
  const omit = new Set<Id>();
  for (const item of context.items) if (isManagedSystem(item.entry)) omit.add(item.entry.id);
  // What other system messages still declare once the omissions apply.
  const remaining = foldTools(context.items.filter((i) => !omit.has(i.entry.id)).map((i) => i.messages));
  const wanted = new Set(prepared.tools.map((t) => t.name));
  const tools: ToolDiff = {
    added: [...prepared.tools],
    removed: [...remaining.values()].filter((t) => !wanted.has(t.name)),
  };

  const nothing =
    prepared.sections.length === 0 &&
    tools.added.length === 0 &&
    tools.removed.length === 0 &&
    omit.size === 0 &&
    prepared.seed.sections.length === 0 &&
    prepared.seed.tools.length === 0;
  // Nothing to declare, supersede or checkpoint: an empty baseline would change neither the model
  // projection nor the durable state, so it is not written (the next non-empty desire writes one).
  if (nothing) return { stale: false, draft: undefined, kind: "none" };

  const changes: SectionChange[] = prepared.sections.map((s) => ({
    key: s.key,
    action: "set",
    value: s.value,
    rendered: s.rendered,
  }));
  const texts: Record<string, string | null> = {};
  for (const s of prepared.sections) texts[s.key] = s.rendered;
  const msg = message(texts, tools, timestamp);
  const edits: ContextEdit[] = [...omit].map((target) => ({ target, action: "omit" }));
  return {
    stale: false,
    draft: systemEntry({ baseline: true, sections: changes }, msg, edits.length > 0 ? edits : undefined),
    kind: "baseline",
  };
}
