/**
 * System section definitions (§8.2 "Typed section definitions") and their mutable registry (§9.6).
 *
 * A section token names a JSON payload type and an append-time renderer. It is not an entry kind, a
 * discovery callback or a read-time projection hook: only preparation calls `render`, and only the
 * final text is stored. The registry holds the current definitions; a preparation captures a snapshot
 * before running hooks, so later registrations affect later preparations only.
 *
 * Used by the generation kind (through `prepareSections`) and by hosts/plugins that define sections.
 */
import { PicoError } from "../core/errors.js";
import type { AnySection, SectionStore, SystemSection } from "../core/registry.js";
import type { JsonObject, JsonValue } from "../storage/records.js";

// The token types live in core, which holds the registry for the harness (h.sections, §9.6).
export type { AnySection, SystemSection };

export function defineSystemSection<T extends JsonValue>(def: { key: string; render(value: T): string }): SystemSection<T> {
  if (typeof def.key !== "string" || def.key === "") throw new TypeError("a system section needs a non-empty key");
  return Object.freeze({ key: def.key, render: (value: T) => def.render(value) });
}

// A type literal (not an interface) so it is a JsonObject: payloads must be JSON-representable.
export type SkillInfo = { name: string; description: string };

/** Built-in sections (§8.2); their content comes from host hooks. */
export const systemSections: {
  readonly identity: SystemSection<string>;
  readonly environment: SystemSection<JsonObject>;
  readonly skills: SystemSection<SkillInfo[]>;
} = Object.freeze({
  identity: defineSystemSection<string>({ key: "pi.identity", render: (text) => text }),
  environment: defineSystemSection<JsonObject>({
    key: "pi.environment",
    render: (env) => {
      const lines = Object.entries(env).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
      return `<environment>\n${lines.join("\n")}\n</environment>`;
    },
  }),
  skills: defineSystemSection<SkillInfo[]>({
    key: "pi.skills",
    render: (skills) => skills.map((skill) => `- ${skill.name}: ${skill.description}`).join("\n"),
  }),
});

export const builtinSystemSections: readonly AnySection[] = [systemSections.identity, systemSections.environment, systemSections.skills];

/** What a preparation captures from the registry before running hooks. */
export interface SectionSnapshot {
  readonly definitions: ReadonlyMap<string, AnySection>;
  /** Sections whose renderer was replaced and not yet acknowledged, with the replacement revision. */
  readonly recompute: ReadonlyMap<string, number>;
}

/**
 * The mutable section registry (§9.6). `register` rejects an existing key; `replace` requires one and
 * marks the section for re-rendering by later preparations until `acknowledge` confirms a preparation
 * that recomputed it was committed; `remove` removes code, never stored section values or text. A
 * harness the turn kit is installed on changes it only through `h.sections` (on the line).
 */
export class SectionRegistry implements SectionStore {
  readonly #sections = new Map<string, AnySection>();
  readonly #recompute = new Map<string, number>();
  #revision = 0;

  constructor(initial: readonly AnySection[] = builtinSystemSections) {
    for (const section of initial) this.register(section);
  }

  register<T extends JsonValue>(section: SystemSection<T>): SystemSection<T> {
    if (this.#sections.has(section.key)) throw new PicoError("conflict", `system section ${section.key} is already registered`);
    this.#sections.set(section.key, section);
    return section;
  }

  /** Replace a definition; the payload shape must stay compatible (otherwise migrate the stored values). */
  replace<T extends JsonValue>(section: SystemSection<T>): SystemSection<T> {
    if (!this.#sections.has(section.key)) throw new PicoError("not_found", `system section ${section.key} is not registered`);
    this.#sections.set(section.key, section);
    this.#recompute.set(section.key, ++this.#revision);
    return section;
  }

  remove(key: string): void {
    if (!this.#sections.delete(key)) throw new PicoError("not_found", `system section ${key} is not registered`);
    this.#recompute.delete(key);
  }

  get(key: string): AnySection | undefined {
    return this.#sections.get(key);
  }

  has(key: string): boolean {
    return this.#sections.has(key);
  }

  keys(): string[] {
    return [...this.#sections.keys()];
  }

  /** The definitions and pending recomputations a preparation captures. */
  snapshot(): SectionSnapshot {
    return { definitions: new Map(this.#sections), recompute: new Map(this.#recompute) };
  }

  /**
   * A preparation that re-rendered replaced sections was committed (or needed no entry): clear their
   * pending mark, unless a newer replacement arrived meanwhile (its work stays pending).
   */
  acknowledge(recomputed: ReadonlyMap<string, number>): void {
    for (const [key, revision] of recomputed) {
      if (this.#recompute.get(key) === revision) this.#recompute.delete(key);
    }
  }
}
