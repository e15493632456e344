/**
 * System sections (§2.1, §8.2, §8.7, §9.6): the machinery the generation kind calls while preparing a
 * request. One entry point, split by concern:
 *
 * - sections-define.ts: `SystemSection` tokens, `defineSystemSection`, built-in `systemSections`, the
 *   mutable `SectionRegistry`.
 * - sections-fold.ts: `foldSectionState` (the durable seed, independent of heads and edits),
 *   `sectionCursor` (the stale check on the line), tool folds.
 * - sections-draft.ts: the mutable `SystemSectionDraft` and `prepareSections` (hooks, render, wrap;
 *   outside the line).
 * - sections-plan.ts: `planSystemEntry` (nothing / delta / fresh baseline; on the line).
 *
 * Flow in a generation: `seed = foldSectionState(storage, conv, tip)` → `prepared = prepareSections(...)`
 * → on the line `planSystemEntry({ context, seedCursor: seed.cursor, currentCursor: sectionCursor(...),
 * prepared, timestamp })` → stale: rerun preparation; otherwise append `draft` (if any) in the same
 * commit as the streaming transition, then `registry.acknowledge(prepared.recomputed)`.
 */
export {
  builtinSystemSections,
  defineSystemSection,
  SectionRegistry,
  systemSections,
  type AnySection,
  type SectionSnapshot,
  type SkillInfo,
  type SystemSection,
} from "./sections-define.js";
export {
  EMPTY_SECTION_STATE,
  foldManaged,
  foldSectionState,
  foldTools,
  isBaselineEntry,
  sectionChanges,
  sectionCursor,
  type SectionState,
  type SectionValue,
} from "./sections-fold.js";
export {
  prepareSections,
  sameJson,
  SYSTEM_INSTRUCTIONS,
  type HookKind,
  type PreparedSections,
  type SectionProblem,
  type SystemInstructionsHooks,
  type SystemInstructionsInput,
  type SystemInstructionsOutput,
  type SystemSectionDraft,
} from "./sections-draft.js";
export { currentEpochBaseline, planSystemEntry, type SystemPlan } from "./sections-plan.js";
export { canonicalJson, jsonCopy } from "./sections-json.js";
