/**
 * Section preparation outside the line (§8.2 "Typed section definitions and one mutable draft", §8.7
 * system_instructions): seed one private ordered draft from the durable section state, let the
 * system_instructions handlers edit it in run order, then render touched sections and apply wrappers.
 *
 * - Handlers share the draft. Under the skip-failed-handler policy a failed handler's mutations and
 *   wrappers are discarded (the draft is snapshotted before each handler and restored on a skip);
 *   earlier handlers' changes stay.
 * - `set` replaces in place, a new key appends; `delete` removes a key, even by string when its
 *   renderer is unavailable; `get`/`set`/`wrap` need a definition registered in the captured snapshot.
 * - Hooks return optional complete tool lists: the last supplied list wins, omission keeps an earlier
 *   one, no supplied list means no desired tools.
 * - Untouched seeded sections keep their stored rendered text even when their renderer is gone; a
 *   set/wrap, or a renderer replacement pending in the registry, re-renders from the payload.
 * - After preparation the draft is closed: a leaked callback cannot alter the prepared result.
 *
 * Used by the generation kind; the result goes to `planSystemEntry` on the line.
 */
import type { Tool } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { PicoError } from "../core/errors.js";
import type { HookRegistry } from "../core/hooks.js";
import type { Id, JsonValue } from "../storage/records.js";
import type { AnySection, SectionRegistry, SectionSnapshot, SystemSection } from "./sections-define.js";
import type { SectionState, SectionValue } from "./sections-fold.js";
import { canonicalJson, jsonCopy } from "./sections-json.js";
import type { CapturedConfig } from "./states.js";

/** The hook point the generation kind declares for instructions (§8.7). */
export const SYSTEM_INSTRUCTIONS = "system_instructions";

export interface SystemSectionDraft {
  /** An owned copy of the draft payload; call `set` to change the draft. */
  get<T>(section: SystemSection<T>): T | undefined;
  set<T>(section: SystemSection<T>, value: T): void;
  delete(section: string | { readonly key: string }): void;
  wrap<T>(section: SystemSection<T>, transform: (text: string) => string): void;
}

/** The system_instructions point's types, for the generation kind's hook declaration (§8.7). */
export interface SystemInstructionsInput {
  readonly conversationId: Id;
  readonly config: CapturedConfig;
  readonly sections: SystemSectionDraft;
}
export type SystemInstructionsOutput = void | { readonly tools?: readonly Tool[] };
// A type literal so it satisfies HookPoints (a record type) and can be intersected into a kind's hooks.
export type SystemInstructionsHooks = {
  system_instructions: { input: SystemInstructionsInput; output: SystemInstructionsOutput };
};

/** A kind as hooks.run sees it: its name and per-point failure policy. */
export interface HookKind {
  readonly kind: string;
  readonly hooks?: Readonly<Record<string, { readonly failClosed?: boolean } | undefined>>;
}

/** The desired complete state one preparation produced. */
export interface PreparedSections {
  /** The durable state the draft was seeded from (the diff base on the line). */
  readonly seed: SectionState;
  /** Desired complete ordered sections. */
  readonly sections: readonly SectionValue[];
  /** Desired complete tool definitions (unique names, in supplied order). */
  readonly tools: readonly Tool[];
  /** Replaced renderers this preparation applied; pass to `SectionRegistry.acknowledge` once committed. */
  readonly recomputed: ReadonlyMap<string, number>;
}

/** A problem preparation reports without failing: a renderer/wrapper throw, a duplicate tool name. */
export interface SectionProblem {
  readonly type: "render_failed" | "duplicate_tool";
  readonly key: string;
  readonly error?: unknown;
}

interface Slot {
  readonly key: string;
  value: JsonValue;
  /** Stored rendered text (seeded), or undefined for a key this preparation added. */
  readonly seeded: string | undefined;
  /** Payload set or wrapped this preparation: recompute the text from the payload. */
  touched: boolean;
  readonly wrappers: ((text: string) => string)[];
}

class Draft implements SystemSectionDraft {
  #slots: Slot[];
  #closed = false;
  readonly #definitions: ReadonlyMap<string, AnySection>;

  constructor(seed: readonly SectionValue[], definitions: ReadonlyMap<string, AnySection>) {
    this.#definitions = definitions;
    this.#slots = seed.map((s) => ({ key: s.key, value: s.value, seeded: s.rendered, touched: false, wrappers: [] }));
  }

  get<T>(section: SystemSection<T>): T | undefined {
    this.#definition(section, "get");
    const slot = this.#slots.find((s) => s.key === section.key);
    return slot === undefined ? undefined : (jsonCopy(slot.value, section.key) as T);
  }

  set<T>(section: SystemSection<T>, value: T): void {
    this.#definition(section, "set");
    const copy = jsonCopy(value, section.key);
    const slot = this.#slots.find((s) => s.key === section.key);
    if (slot === undefined)
      this.#slots.push({ key: section.key, value: copy, seeded: undefined, touched: true, wrappers: [] });
    else {
      slot.value = copy;
      slot.touched = true;
    }
  }

  delete(section: string | { readonly key: string }): void {
    this.#open("delete");
    const key = typeof section === "string" ? section : section.key;
    this.#slots = this.#slots.filter((s) => s.key !== key);
  }

  wrap<T>(section: SystemSection<T>, transform: (text: string) => string): void {
    this.#definition(section, "wrap");
    if (typeof transform !== "function") throw new TypeError(`wrap(${section.key}): the transform must be a function`);
    const slot = this.#slots.find((s) => s.key === section.key);
    // Wrapping an absent section does nothing: wrappers live on draft sections, not on tokens.
    if (slot === undefined) return;
    slot.wrappers.push(transform);
    slot.touched = true;
  }

  /** A copy to restore if the running handler fails. */
  save(): Slot[] {
    return this.#slots.map((s) => ({ ...s, wrappers: [...s.wrappers] }));
  }

  restore(saved: Slot[]): void {
    this.#slots = saved;
  }

  close(): readonly Slot[] {
    this.#closed = true;
    return this.#slots;
  }

  #open(op: string): void {
    if (this.#closed) throw new PicoError("contract", `system section draft: ${op} after preparation finished`);
  }

  #definition(section: { readonly key: string }, op: string): AnySection {
    this.#open(op);
    const definition = this.#definitions.get(section.key);
    if (definition === undefined) {
      throw new PicoError(
        "not_found",
        `system section ${section.key} is not registered; ${op} needs a registered definition (delete works by key)`,
      );
    }
    return definition;
  }
}

function isToolList(value: unknown): value is readonly Tool[] {
  return (
    Array.isArray(value) &&
    value.every((t) => t !== null && typeof t === "object" && typeof (t as { name?: unknown }).name === "string")
  );
}

/**
 * Prepare desired sections and tools outside the line: seed, run handlers, render, wrap.
 * Cancellation from a handler propagates; a fail-closed point's failure rejects.
 */
export async function prepareSections(args: {
  readonly seed: SectionState;
  readonly registry: SectionRegistry;
  readonly hooks: HookRegistry;
  readonly kind: HookKind;
  readonly chain: readonly Id[];
  readonly conversationId: Id;
  readonly config: CapturedConfig;
  readonly call: Call;
  readonly report?: (problem: SectionProblem) => void;
  /** Captured definitions; default: the registry's current snapshot, taken before hooks run. */
  readonly snapshot?: SectionSnapshot;
}): Promise<PreparedSections> {
  const snapshot = args.snapshot ?? args.registry.snapshot();
  const report = args.report ?? (() => undefined);
  const draft = new Draft(args.seed.sections, snapshot.definitions);
  const input: SystemInstructionsInput = { conversationId: args.conversationId, config: args.config, sections: draft };

  let tools: readonly Tool[] | undefined;
  let slots: readonly Slot[] = [];
  let saved: { slots: Slot[]; tools: readonly Tool[] | undefined } | undefined;
  try {
    await args.hooks.run(args.kind, SYSTEM_INSTRUCTIONS, input, args.chain, args.call, {
      enter: () => {
        saved = { slots: draft.save(), tools };
      },
      returned: (output) => {
        if (output === undefined || output === null || typeof output !== "object") return;
        const supplied = (output as { tools?: unknown }).tools;
        if (supplied === undefined) return; // omission keeps an earlier handler's list
        if (!isToolList(supplied))
          throw new TypeError("system_instructions: tools must be a list of complete tool definitions");
        // Stored as JSON in toolsAdded: keep exactly what JSON keeps (schema libraries' symbol keys drop).
        tools = supplied.map((tool) => JSON.parse(JSON.stringify(tool)) as Tool);
      },
      skipped: () => {
        if (saved === undefined) return;
        draft.restore(saved.slots);
        tools = saved.tools;
      },
    });
  } finally {
    slots = draft.close();
  }

  // Render touched sections (and replaced renderers) outside the line; wrappers in registration order.
  const recomputed = new Map<string, number>();
  const sections: SectionValue[] = [];
  const seeded = new Map(args.seed.sections.map((s) => [s.key, s]));
  for (const slot of slots) {
    const pending = snapshot.recompute.get(slot.key);
    const definition = snapshot.definitions.get(slot.key);
    const recompute = pending !== undefined && definition !== undefined && slot.seeded !== undefined;
    if (!slot.touched && !recompute) {
      sections.push(Object.freeze({ key: slot.key, value: slot.value, rendered: slot.seeded as string }));
      continue;
    }
    try {
      if (definition === undefined) throw new Error(`no definition for ${slot.key}`); // touched implies registered
      let text = definition.render(slot.value);
      for (const wrapper of slot.wrappers) text = wrapper(text);
      if (typeof text !== "string") throw new TypeError(`section ${slot.key} rendered a ${typeof text}, not text`);
      sections.push(Object.freeze({ key: slot.key, value: slot.value, rendered: text }));
      if (pending !== undefined) recomputed.set(slot.key, pending);
    } catch (error) {
      // A failed render must not publish a partial change: keep the seeded section as stored (or
      // leave a new key out).
      report({ type: "render_failed", key: slot.key, error });
      const previous = seeded.get(slot.key);
      if (previous !== undefined) sections.push(previous);
    }
  }

  return Object.freeze({
    seed: args.seed,
    sections: Object.freeze(sections),
    tools: Object.freeze(uniqueTools(tools ?? [], report)),
    recomputed,
  });
}

/** Desired tools with unique names: a later same-name definition replaces the earlier one in place. */
function uniqueTools(tools: readonly Tool[], report: (problem: SectionProblem) => void): Tool[] {
  const byName = new Map<string, Tool>();
  for (const tool of tools) {
    if (byName.has(tool.name)) report({ type: "duplicate_tool", key: tool.name });
    byName.set(tool.name, tool);
  }
  return [...byName.values()];
}

/** Structural equality of JSON payloads or tool definitions, ignoring object-key order. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
