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
import { type AnySection, PlainSectionStore, type SystemSection } from "../core/registry.js";
import type { JsonObject, JsonValue } from "../storage/records.js";

// The token types and the section map live in core, which holds the registry for the harness
// (h.sections, §9.6).
export type { AnySection, SystemSection };

export function defineSystemSection<T extends JsonValue>(def: {
  key: string;
  render(value: T): string;
}): SystemSection<T> {
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

export const builtinSystemSections: readonly AnySection[] = [
  systemSections.identity,
  systemSections.environment,
  systemSections.skills,
];

/** What a preparation captures from the registry before running hooks. */
export interface SectionSnapshot {
  readonly definitions: ReadonlyMap<string, AnySection>;
  /** Sections whose renderer was replaced and not yet acknowledged, with the replacement revision. */
  readonly recompute: ReadonlyMap<string, number>;
}

/**
 * The mutable section registry (§9.6): core's section map (PlainSectionStore: `register` rejects an
 * existing key; `replace` and `remove` need one) plus re-rendering marks. `replace` marks the section
 * for re-rendering by later preparations until `acknowledge` confirms a preparation that recomputed it
 * was committed; `remove` removes code, never stored section values or text. A harness the turn kit is
 * installed on changes it only through `h.sections` (on the line).
 */
export class SectionRegistry extends PlainSectionStore {
  readonly #recompute = new Map<string, number>();
  #revision = 0;

  constructor(initial: readonly AnySection[] = builtinSystemSections) {
    super();
    for (const section of initial) this.register(section);
  }

  /** Replace a definition; the payload shape must stay compatible (otherwise migrate the stored values). */
  override replace<T extends JsonValue>(section: SystemSection<T>): SystemSection<T> {
    super.replace(section);
    this.#recompute.set(section.key, ++this.#revision);
    return section;
  }

  override remove(key: string): void {
    super.remove(key);
    this.#recompute.delete(key);
  }

  /** The definitions and pending recomputations a preparation captures. */
  snapshot(): SectionSnapshot {
    return { definitions: this.definitions(), recompute: new Map(this.#recompute) };
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
