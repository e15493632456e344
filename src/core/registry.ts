/**
 * Mutable registration (§9.6): the harness's entry-kind, task-kind and section registries as the host
 * and plugins see them. Reads (`get`, `has`, `names`) are pure accessors; every change (`register`,
 * `replace`, `remove`) takes a final Call and is one operation on the commit line, serialized with
 * commits and driver decisions, admitted like a commit (not on a faulted or closing session, not from a
 * stale invocation), and re-examines what is parked waiting for a registration (a task of a missing kind,
 * or of a kind that needs a missing entry kind or section, §5.2 `needs`).
 *
 * The stores underneath are plain synchronous maps (EntryKindRegistry, TaskKindRegistry, the turn kit's
 * SectionRegistry); only the harness holds them for writing.
 *
 * @example
 * await h.entryKinds.register(noteKind, call);
 * await h.sections.replace(policySectionV2, call);
 * await h.taskKinds.remove("reminder", call);
 */
import type { JsonValue } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";

/**
 * A system section token (§8.2): a stable key, a JSON payload type and an append-time renderer. Defined
 * here so the harness can hold the section registry; the kinds layer builds and renders them.
 */
export interface SystemSection<T> {
  readonly key: string;
  render(value: T): string;
}

/** A section as a registry holds it; method bivariance lets every typed token in. */
export type AnySection = SystemSection<JsonValue>;

/** The synchronous section store the harness changes on the line (the turn kit's SectionRegistry is one). */
export interface SectionStore {
  register(section: AnySection): unknown;
  replace(section: AnySection): unknown;
  remove(key: string): void;
  get(key: string): AnySection | undefined;
  has(key: string): boolean;
  keys(): string[];
}

/**
 * The section map: definitions by key, where `register` rejects an existing key and `replace` and
 * `remove` need one. The store of a harness that no turn kit installed its own into; the turn kit's
 * SectionRegistry extends it with re-rendering marks (§9.6).
 */
export class PlainSectionStore implements SectionStore {
  readonly #sections = new Map<string, AnySection>();

  register<T extends JsonValue>(section: SystemSection<T>): SystemSection<T> {
    if (this.#sections.has(section.key))
      throw new PicoError("conflict", `system section ${section.key} is already registered`);
    this.#sections.set(section.key, section);
    return section;
  }

  replace<T extends JsonValue>(section: SystemSection<T>): SystemSection<T> {
    if (!this.#sections.has(section.key))
      throw new PicoError("not_found", `system section ${section.key} is not registered`);
    this.#sections.set(section.key, section);
    return section;
  }

  remove(key: string): void {
    if (!this.#sections.delete(key)) throw new PicoError("not_found", `system section ${key} is not registered`);
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

  /** A copy of the current definitions, in registration order. */
  definitions(): Map<string, AnySection> {
    return new Map(this.#sections);
  }
}

/** What a line registry changes and reads (the harness binds it to one store). */
export interface RegistryStore<D> {
  register(definition: D): void;
  replace(definition: D): void;
  remove(name: string): void;
  get(name: string): D | undefined;
  has(name: string): boolean;
  names(): string[];
}

/** Runs one registry change on the line (the harness's admission, the change, the unparking). */
export type RegistryChange = (change: () => void, call: Call) => Promise<void>;

/**
 * A registry whose changes are Calls on the line (§9.6). `register` rejects an existing name, `replace`
 * needs an existing compatible one, `remove` removes code, never stored entries, tasks or section values.
 */
export class LineRegistry<D> {
  readonly #store: RegistryStore<D>;
  readonly #change: RegistryChange;

  constructor(store: RegistryStore<D>, change: RegistryChange) {
    this.#store = store;
    this.#change = change;
  }

  /** Register a new definition; resolves with it once the change is on the line. */
  async register<T extends D>(definition: T, call: Call): Promise<T> {
    await this.#change(() => this.#store.register(definition), call);
    return definition;
  }

  /** Replace a registered definition; existing invocations and preparations keep the one they captured. */
  async replace<T extends D>(definition: T, call: Call): Promise<T> {
    await this.#change(() => this.#store.replace(definition), call);
    return definition;
  }

  remove(name: string, call: Call): Promise<void> {
    return this.#change(() => this.#store.remove(name), call);
  }

  get(name: string): D | undefined {
    return this.#store.get(name);
  }

  has(name: string): boolean {
    return this.#store.has(name);
  }

  names(): string[] {
    return this.#store.names();
  }
}
