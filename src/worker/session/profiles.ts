/**
 * A session's instructions from its tenant's profiles (docs/users.md "Instructions"), through §8.2's sections.
 *
 * - `ProfileCache` is the session's copy of the profiles it names, in memory only: each name's latest
 *   version as last read (`head`, what a generation created now captures, TurnOptions.profileVersion) and
 *   the versions it rendered (a `(name, version)` always means the same sections, so those never go
 *   stale). `refresh` reads a name's latest version from the tenant's DirectoryObject when the copy is
 *   older than asked; a failed read keeps the copy and is reported.
 * - The host's `system_instructions` handler renders the generation's captured version (or, when the
 *   generation captured none, the latest) with the session's variables as the one section `edge.profile`,
 *   payload `{ name, version, sections }`. So the first request writes a baseline holding the text, an
 *   edited profile or a changed variable is a delta on the next generation, and clearing the profile
 *   deletes the key explicitly. A profile that cannot be read (deleted, or the directory unreachable)
 *   keeps the instructions last prepared: a missing source is not a deletion (§8.2).
 * - Variables are one sticky session value (`edge.profile.variables`): they do not rewind, and forks see
 *   them. A placeholder without a value renders empty.
 */
import type { Harness } from "../../core/harness.js";
import type { HookRegistry } from "../../core/hooks.js";
import type { Clock } from "../../core/host.js";
import { bind, sessionValue, type ValueSpec } from "../../core/state.js";
import { foldSectionState } from "../../kinds/sections-fold.js";
import { defineSystemSection, type SectionRegistry } from "../../kinds/sections-define.js";
import type { TurnKit } from "../../kinds/turns.js";
import type { Id } from "../../storage/records.js";
import type { ProfileRecord } from "../../api/profiles.js";

/** One rendered section of a profile: its id and its text with the variables filled in. */
export type RenderedSection = { id: string; text: string };

/** The `edge.profile` section's payload: the profile and version it was rendered from, and its sections. */
export type ProfilePayload = { name: string; version: number; sections: RenderedSection[] };

/** The session's variables (docs/users.md "Instructions"): sticky, so they do not rewind and forks see them. */
export const profileVariables: ValueSpec<Record<string, string>> =
  sessionValue<Record<string, string>>("edge.profile.variables");

/** Sections of a profile are separated by one blank line in the system text. */
export const profileSection = defineSystemSection<ProfilePayload>({
  key: "edge.profile",
  render: (payload) => payload.sections.map((section) => section.text).join("\n\n"),
});

const PLACEHOLDER = /\{\{([a-z0-9_]+)\}\}/g;

/** A section's text with each `{{name}}` replaced by its value; a placeholder without one renders empty. */
export function fillPlaceholders(text: string, variables: Readonly<Record<string, string>>): string {
  return text.replace(PLACEHOLDER, (_match, name: string) => variables[name] ?? "");
}

/** Where the cache reads profiles: the tenant's DirectoryObject (undefined: the session has no tenant). */
export interface ProfileSource {
  latest(name: string): Promise<ProfileRecord | undefined> | undefined;
  version(name: string, version: number): Promise<ProfileRecord | undefined> | undefined;
}

interface Head {
  /** Undefined: the tenant has no live profile of that name. */
  readonly version: number | undefined;
  readonly at: number;
}

/** Versions kept in memory (each immutable); the oldest read is dropped first. */
const KEPT_VERSIONS = 16;

export class ProfileCache {
  readonly #source: ProfileSource;
  readonly #clock: Clock;
  readonly #report: (error: unknown) => void;
  readonly #heads = new Map<string, Head>();
  readonly #versions = new Map<string, ProfileRecord>();
  readonly #reading = new Map<string, Promise<void>>();
  /** Names whose last read failed (cleared by the next read that answers). */
  readonly #failing = new Set<string>();

  constructor(source: ProfileSource, clock: Clock, report: (error: unknown) => void) {
    this.#source = source;
    this.#clock = clock;
    this.#report = report;
  }

  /** Whether the last read of `name` (its latest version or one version) failed. */
  failing(name: string): boolean {
    return this.#failing.has(name);
  }

  /** The latest version of `name` as last read; undefined when never read or not a live profile. */
  head(name: string): number | undefined {
    return this.#heads.get(name)?.version;
  }

  /** Read `name`'s latest version unless the copy is at most `maxAgeMs` old; concurrent reads share one. */
  async refresh(name: string, maxAgeMs: number): Promise<void> {
    const head = this.#heads.get(name);
    if (head !== undefined && this.#clock.now() - head.at <= maxAgeMs && maxAgeMs > 0) return;
    const reading = this.#reading.get(name);
    if (reading !== undefined) return reading;
    const read = this.#read(name).finally(() => this.#reading.delete(name));
    this.#reading.set(name, read);
    return read;
  }

  /** One version's record: from memory, else read (undefined: unknown, or the read failed and was reported). */
  async record(name: string, version: number): Promise<ProfileRecord | undefined> {
    const key = `${name}@${version}`;
    const kept = this.#versions.get(key);
    if (kept !== undefined) return kept;
    try {
      const record = await this.#source.version(name, version);
      this.#failing.delete(name);
      if (record !== undefined) this.#keep(record);
      return record;
    } catch (error) {
      this.#failing.add(name);
      this.#report(error);
      return undefined;
    }
  }

  async #read(name: string): Promise<void> {
    try {
      const latest = this.#source.latest(name);
      if (latest === undefined) return;
      const record = await latest;
      this.#failing.delete(name);
      this.#heads.set(name, { version: record?.version, at: this.#clock.now() });
      if (record !== undefined) this.#keep(record);
    } catch (error) {
      this.#failing.add(name);
      this.#report(error);
    }
  }

  #keep(record: ProfileRecord): void {
    const key = `${record.name}@${record.version}`;
    this.#versions.delete(key);
    this.#versions.set(key, record);
    while (this.#versions.size > KEPT_VERSIONS) {
      const oldest = this.#versions.keys().next().value;
      if (oldest === undefined) break;
      this.#versions.delete(oldest);
    }
  }
}

/**
 * How old a profile's latest version may be when a request is prepared: a generation created right after
 * an accept (which read it) does not read it again, a later one (after tools) does.
 */
const PREPARE_MAX_AGE_MS = 1_000;

/** How long a first preparation waits between reads of a profile the directory did not answer for. */
const UNREAD_WAITS_MS = [250, 1_000, 3_000] as const;

/**
 * Register the `edge.profile` section and the handler that fills it. Registered after the kit's own
 * harness-wide handler (which offers the selected tools); it returns no tools, so that list stands.
 */
export function installProfiles(kit: TurnKit, harness: Harness, cache: ProfileCache): void {
  registerProfileSection(kit.sections);
  profileHandler(kit.hooks, kit.generation, cache, async () => readVariables(harness));
}

export function registerProfileSection(sections: SectionRegistry): void {
  if (sections.get(profileSection.key) === undefined) sections.register(profileSection);
}

export function profileHandler(
  hooks: HookRegistry,
  generation: TurnKit["generation"],
  cache: ProfileCache,
  variables: () => Promise<Readonly<Record<string, string>>>,
): void {
  hooks.on(generation, "system_instructions", async ({ config, sections }) => {
    const name = config.profile;
    if (name === null) {
      sections.delete(profileSection);
      return;
    }
    // A profile that cannot be read keeps the instructions last prepared; a conversation with none yet
    // waits a few seconds for the directory before its request goes out without them (reported).
    const waits = sections.get(profileSection) === undefined ? [...UNREAD_WAITS_MS] : [];
    let record: ProfileRecord | undefined;
    let version: number | undefined;
    for (;;) {
      await cache.refresh(name, PREPARE_MAX_AGE_MS);
      version = config.profileVersion ?? cache.head(name);
      record = version === undefined ? undefined : await cache.record(name, version);
      const wait = waits.shift();
      if (record !== undefined || !cache.failing(name) || wait === undefined) break;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    if (record === undefined || version === undefined) return;
    const values = await variables();
    sections.set(profileSection, {
      name,
      version,
      sections: record.sections.map((section) => ({ id: section.id, text: fillPlaceholders(section.text, values) })),
    });
  });
}

/** The session's variables (none set: empty). */
export async function readVariables(harness: Harness): Promise<Record<string, string>> {
  return (await harness.storage.getValue(bind(profileVariables, {})))?.value ?? {};
}

/** The profile and version a conversation's instructions were last prepared from (absent: none prepared). */
export async function preparedProfile(
  harness: Harness,
  conversationId: Id,
): Promise<{ readonly name: string; readonly version: number } | undefined> {
  const state = await foldSectionState(harness.storage, conversationId, harness.storage.lastSeq);
  const value = state.sections.find((section) => section.key === profileSection.key)?.value;
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const { name, version } = value as Partial<ProfilePayload>;
  return typeof name === "string" && typeof version === "number" ? { name, version } : undefined;
}
