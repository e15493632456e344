/**
 * System sections (§2.1, §8.2, §8.7, §9.6): durable seed, the shared draft under system_instructions
 * handlers, and the line's nothing / delta / fresh-baseline decision, on memory and on SQLite.
 * Histories are built with direct harness commits at the spec's ids; preparation and planning are
 * called directly, as the generation kind calls them.
 */
import type { SystemMessage, Tool } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { deriveContext } from "../../src/core/context.js";
import {
  assistantEntry,
  assistantKind,
  noticeEntry,
  noticeKind,
  summaryEntry,
  summaryKind,
  systemKind,
  userEntry,
  userKind,
  type SystemEntry,
} from "../../src/core/entries.js";
import type { Harness } from "../../src/core/harness.js";
import { HookRegistry, type HookFailure, type HookHandler } from "../../src/core/hooks.js";
import { bindTo, conversationValue } from "../../src/core/state.js";
import type { HookSpecs } from "../../src/core/task-kind.js";
import { generationConfig } from "../../src/kinds/config.js";
import {
  defineSystemSection,
  foldSectionState,
  planSystemEntry,
  prepareSections,
  sectionCursor,
  SectionRegistry,
  systemSections,
  type PreparedSections,
  type SectionProblem,
  type SectionState,
  type SystemInstructionsHooks,
  type SystemInstructionsInput,
  type SystemInstructionsOutput,
  type SystemPlan,
  type SystemSectionDraft,
} from "../../src/kinds/sections.js";
import type { CapturedConfig } from "../../src/kinds/states.js";
import type { Entry, Id, JsonObject } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "../core/backends.js";
import { CountingStorage } from "../core/counting-storage.js";
import { assistant, call, fillTo, openHarness, user } from "../core/fixtures.js";

type Run = (fn: (storage: Storage) => Promise<void>) => Promise<void>;
const backends: [string, Run][] = coreBackends.map((backend) => [backend.name, (fn) => backend.run(fn)]);

const generationKind: { readonly kind: string; readonly hooks?: HookSpecs<SystemInstructionsHooks> } = {
  kind: "generation",
};

// ---------------------------------------------------------------------------------------------
// Fixtures

const tool = (
  name: string,
  description = `${name} a file`,
  parameters: JsonObject = { type: "object", properties: { path: { type: "string" } } },
): Tool => ({
  name,
  description,
  parameters,
});
const catalogue: Record<string, Tool> = {
  read: tool("read"),
  write: tool("write"),
  grep: tool("grep", "search files"),
};

const planModeSection = defineSystemSection<boolean>({
  key: "plan_mode",
  render: (on) => (on ? "<plan_mode>Plan only; do not edit files.</plan_mode>" : "<plan_mode>off</plan_mode>"),
});
const planMode = conversationValue<boolean>("test.plan_mode", { rewind: true });

/** One session under test: harness, a section registry, a hook registry and what they reported. */
class Env {
  readonly hooks: HookRegistry;
  readonly failures: HookFailure[] = [];
  readonly problems: SectionProblem[] = [];
  registry = new SectionRegistry();
  constructor(
    readonly harness: Harness,
    readonly conv: Id,
  ) {
    this.hooks = new HookRegistry((failure) => this.failures.push(failure));
  }

  static async open(storage: Storage): Promise<Env> {
    const harness = await openHarness(storage);
    return new Env(harness, harness.rootId);
  }

  get storage(): Storage {
    return this.harness.storage;
  }

  on(handler: HookHandler<SystemInstructionsInput, SystemInstructionsOutput>, conversationId?: Id): () => void {
    return this.hooks.on(
      generationKind,
      "system_instructions",
      handler,
      conversationId === undefined ? {} : { conversationId },
    );
  }

  /** Commit one entry at exactly `id` (gaps filled with session writes). */
  async at(id: Id, write: (conv: Id) => Parameters<Harness["commit"]>[0], conv = this.conv): Promise<void> {
    await fillTo(this.harness, id - 1);
    const got = await this.harness.commit(write(conv), call);
    expect(got).toBe(id);
  }

  user(id: Id, text = `u${id}`, conv = this.conv): Promise<void> {
    return this.at(id, (c) => (tx) => tx.entry(userKind, c, userEntry(text, 0)), conv);
  }

  assistant(id: Id, text = `a${id}`, conv = this.conv): Promise<void> {
    return this.at(id, (c) => (tx) => tx.entry(assistantKind, c, assistantEntry(assistant(text))), conv);
  }

  async config(conv = this.conv): Promise<CapturedConfig> {
    const tools = await this.storage.getValue(bindTo(generationConfig.selectedTools, conv));
    return { model: "faux/faux", thinking: null, tools: tools?.value ?? [], profile: null, budgetMs: 1000 };
  }

  async prepare(conv = this.conv): Promise<{ seed: SectionState; prepared: PreparedSections }> {
    const seed = await foldSectionState(this.storage, conv, this.storage.lastSeq);
    const prepared = await prepareSections({
      seed,
      registry: this.registry,
      hooks: this.hooks,
      kind: generationKind,
      chain: [conv],
      conversationId: conv,
      config: await this.config(conv),
      call,
      report: (problem) => this.problems.push(problem),
    });
    return { seed, prepared };
  }

  /**
   * One generation's preparation: seed and hooks outside the line, then (at `at`, if given) the plan
   * and its entry in one commit. Returns the plan and the appended entry, if any.
   */
  async generate(
    o: { at?: Id; conv?: Id; between?: () => Promise<void> } = {},
  ): Promise<{ plan: SystemPlan; entry?: SystemEntry }> {
    const conv = o.conv ?? this.conv;
    const { seed, prepared } = await this.prepare(conv);
    await o.between?.();
    if (o.at !== undefined) await fillTo(this.harness, o.at - 1);
    const result = await this.harness.commit(async (tx) => {
      const handle = await this.harness.conversation(conv, call);
      const context = await handle!.contextEntries(undefined, call);
      const currentCursor = await sectionCursor(this.storage, conv, this.storage.lastSeq);
      const plan = planSystemEntry({ context, seedCursor: seed.cursor, currentCursor, prepared, timestamp: 7 });
      const id = !plan.stale && plan.draft !== undefined ? tx.entry(systemKind, conv, plan.draft) : undefined;
      return { plan, id };
    }, call);
    if (!result.plan.stale) this.registry.acknowledge(prepared.recomputed);
    if (result.id === undefined) return { plan: result.plan };
    if (o.at !== undefined) expect(result.id).toBe(o.at);
    const entry = (await this.storage.getEntries([result.id])).get(result.id);
    expect(systemKind.is(entry)).toBe(true);
    return { plan: result.plan, entry: entry as SystemEntry };
  }

  async context(through = this.storage.lastSeq, conv = this.conv): Promise<Id[]> {
    return [...(await deriveContext(this.storage, conv, through)).ids];
  }
}

function messageOf(entry: SystemEntry | undefined): SystemMessage | undefined {
  expect(entry).toBeDefined();
  expect(entry!.model.length).toBeLessThanOrEqual(1);
  return entry!.model[0];
}

/** The host's instructions for the §8.2 example: identity, plan mode from config, selected tools. */
function hostInstructions(env: Env): HookHandler<SystemInstructionsInput, SystemInstructionsOutput> {
  return async ({ sections, config, conversationId }) => {
    sections.set(systemSections.identity, "You are pi, a coding agent.");
    const plan = await env.storage.getValue(bindTo(planMode, conversationId));
    sections.set(planModeSection, plan?.value ?? false);
    return { tools: config.tools.map((name) => catalogue[name]!) };
  };
}

async function configCommit(env: Env, id: Id, plan: boolean, tools: string[]): Promise<void> {
  await fillTo(env.harness, id - 1);
  await env.harness.commit((tx) => {
    tx.value(bindTo(planMode, env.conv)).set(plan);
    tx.value(bindTo(generationConfig.selectedTools, env.conv)).set(tools);
  }, call);
}

const IDENTITY = "You are pi, a coding agent.";
const PLAN_OFF = "<plan_mode>off</plan_mode>";
const PLAN_ON = "<plan_mode>Plan only; do not edit files.</plan_mode>";

/** §8.2's example through 130: 100 user; 110 baseline; 120 assistant; 125 config; 130 user. */
async function section82Through130(env: Env): Promise<void> {
  if (!env.registry.has(planModeSection.key)) env.registry.register(planModeSection);
  await configCommit(env, 50, false, ["read", "write"]);
  await env.user(100);
  const baseline = await env.generate({ at: 110 });
  expect(baseline.plan).toMatchObject({ stale: false, kind: "baseline" });
  expect(baseline.entry!.data).toEqual({
    baseline: true,
    sections: [
      { key: "pi.identity", action: "set", value: IDENTITY, rendered: IDENTITY },
      { key: "plan_mode", action: "set", value: false, rendered: PLAN_OFF },
    ],
  });
  expect(baseline.entry!.edits).toBeUndefined();
  expect(messageOf(baseline.entry)).toEqual({
    role: "system",
    content: "",
    sections: { "pi.identity": IDENTITY, plan_mode: PLAN_OFF },
    toolsAdded: [catalogue.read, catalogue.write],
    timestamp: 7,
  });
  await env.assistant(120);
  await configCommit(env, 125, true, ["read", "grep"]);
  await env.user(130);
}

function expectDelta140(entry: SystemEntry | undefined): void {
  expect(entry?.id).toBe(140);
  expect(entry!.data).toEqual({ sections: [{ key: "plan_mode", action: "set", value: true, rendered: PLAN_ON }] });
  expect(entry!.edits).toBeUndefined();
  expect(messageOf(entry)).toEqual({
    role: "system",
    content: "",
    sections: { plan_mode: PLAN_ON },
    toolsAdded: [catalogue.grep],
    toolsRemoved: [catalogue.write],
    timestamp: 7,
  });
}

describe.each(backends)("system sections (%s)", (_name, run) => {
  // -------------------------------------------------------------------------------------------
  // §8.2 worked examples

  it("§8.2 section example: preparation writes the delta at 140 (replace plan_mode, toolsRemoved [write], toolsAdded [grep])", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(hostInstructions(env));
      await section82Through130(env);
      const delta = await env.generate({ at: 140 });
      expect(delta.plan).toMatchObject({ stale: false, kind: "delta" });
      expectDelta140(delta.entry);
      await env.assistant(150);
      expect(await env.context()).toEqual([100, 110, 120, 130, 140, 150]);
      const state = await foldSectionState(storage, env.conv, 150);
      expect(state.cursor).toBe(140);
      expect(state.sections.map((s) => [s.key, s.value, s.rendered])).toEqual([
        ["pi.identity", IDENTITY, IDENTITY],
        ["plan_mode", true, PLAN_ON],
      ]);
      expect(state.tools.map((t) => t.name)).toEqual(["read", "grep"]);
      expect(env.failures).toEqual([]);
    }));

  it("§8.2 crash between 125 and 140: the next generation prepares the missing change", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(hostInstructions(env));
      await section82Through130(env);
      // A preparation ran and then the process died before its commit: nothing of it is durable.
      await env.prepare();
      // Restart: a new harness over the same storage, fresh process-local registries and hooks.
      const harness = await openHarness(storage);
      const restarted = new Env(harness, env.conv);
      restarted.on(hostInstructions(restarted));
      restarted.registry.register(planModeSection);
      const delta = await restarted.generate({ at: 140 });
      expectDelta140(delta.entry);
      expect(await restarted.context(140)).toEqual([100, 110, 120, 130, 140]);
      expect([...env.failures, ...restarted.failures]).toEqual([]);
    }));

  it("§8.2 unchanged hook answer writes no delta", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(hostInstructions(env));
      await section82Through130(env);
      expectDelta140((await env.generate({ at: 140 })).entry);
      const last = storage.lastSeq;
      const again = await env.generate();
      expect(again.plan).toEqual({ stale: false, draft: undefined, kind: "none" });
      expect(again.entry).toBeUndefined();
      expect(storage.lastSeq).toBe(last);
      // And right after a baseline, too.
      await env.assistant(150);
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
    }));

  it("§8.2 baseline at 81 with its omission of 31 (10 user; 11 baseline; ... 60 summary head=30; 81 baseline)", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let cwd = "/srv/app-a";
      env.on(({ sections }) => {
        sections.set(systemSections.identity, IDENTITY);
        sections.set(systemSections.environment, { cwd });
        return { tools: [catalogue.read!] };
      });
      await env.user(10);
      const b11 = await env.generate({ at: 11 });
      expect(b11.plan).toMatchObject({ kind: "baseline" });
      await env.assistant(20);
      await env.user(30);
      cwd = "/srv/app-b";
      const d31 = await env.generate({ at: 31 });
      expect(d31.plan).toMatchObject({ kind: "delta" });
      expect(d31.entry!.data).toEqual({
        sections: [
          {
            key: "pi.environment",
            action: "set",
            value: { cwd: "/srv/app-b" },
            rendered: "<environment>\ncwd: /srv/app-b\n</environment>",
          },
        ],
      });
      await env.at(35, (c) => (tx) => tx.entry(noticeKind, c, noticeEntry({ job: 7 }, user("job 7 finished"))));
      await env.assistant(40);
      await env.user(50);
      await env.at(60, (c) => (tx) => tx.entry(summaryKind, c, summaryEntry("summary of 10-20", 20, 30, 0)));
      expect(await env.context(60)).toEqual([60, 30, 31, 35, 40, 50]);
      await env.assistant(70);
      await env.user(80);
      const b81 = await env.generate({ at: 81 });
      expect(b81.plan).toMatchObject({ kind: "baseline" });
      expect(b81.entry!.edits).toEqual([{ target: 31, action: "omit" }]);
      expect(b81.entry!.data).toEqual({
        baseline: true,
        sections: [
          { key: "pi.identity", action: "set", value: IDENTITY, rendered: IDENTITY },
          {
            key: "pi.environment",
            action: "set",
            value: { cwd: "/srv/app-b" },
            rendered: "<environment>\ncwd: /srv/app-b\n</environment>",
          },
        ],
      });
      expect(messageOf(b81.entry)).toEqual({
        role: "system",
        content: "",
        sections: { "pi.identity": IDENTITY, "pi.environment": "<environment>\ncwd: /srv/app-b\n</environment>" },
        toolsAdded: [catalogue.read],
        timestamp: 7,
      });
      expect(await env.context(81)).toEqual([60, 30, 35, 40, 50, 70, 80, 81]);
      // Its own supersession omissions do not trigger another rebaseline.
      const again = await env.generate();
      expect(again.plan).toMatchObject({ kind: "none" });
      expect(env.failures).toEqual([]);
    }));

  it("§8.2 baseline omits retained managed entries but never unrelated system notices", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let text = "one";
      env.on(({ sections }) => void sections.set(systemSections.identity, text));
      await env.user(10);
      await env.generate({ at: 11 });
      await env.assistant(20);
      await env.user(30);
      text = "two";
      await env.generate({ at: 31 });
      // 32: an unrelated (non-managed) system notice; 33: a job notice.
      await env.at(
        32,
        (c) => (tx) =>
          tx.entry(systemKind, c, {
            data: { note: "disk almost full" },
            model: [{ role: "system", content: "Disk almost full.", timestamp: 0 }],
          }),
      );
      await env.at(33, (c) => (tx) => tx.entry(noticeKind, c, noticeEntry({ job: 7 }, user("job 7 done"))));
      await env.assistant(40);
      await env.at(50, (c) => (tx) => tx.entry(summaryKind, c, summaryEntry("s", 20, 30, 0)));
      expect(await env.context(50)).toEqual([50, 30, 31, 32, 33, 40]);
      const baseline = await env.generate({ at: 51 });
      expect(baseline.plan).toMatchObject({ kind: "baseline" });
      expect(baseline.entry!.edits).toEqual([{ target: 31, action: "omit" }]);
      expect(await env.context(51)).toEqual([50, 30, 32, 33, 40, 51]);
    }));

  // -------------------------------------------------------------------------------------------
  // Durable seed

  it("§8.2 an unavailable plugin's instructions survive compaction", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const policy = defineSystemSection<{ level: string }>({
        key: "plugin.policy",
        render: (p) => `<policy>level ${p.level}</policy>`,
      });
      env.registry.register(policy);
      env.on(({ sections }) => void sections.set(systemSections.identity, IDENTITY));
      const dispose = env.on(({ sections }) => void sections.set(policy, { level: "strict" }));
      await env.user(10);
      expect((await env.generate({ at: 11 })).plan).toMatchObject({ kind: "baseline" });
      await env.assistant(20);
      await env.user(30);
      await env.assistant(40);
      // The plugin goes away: its hook and its definition. Then a summary drops baseline 11 from context.
      dispose();
      env.registry.remove(policy.key);
      await env.at(50, (c) => (tx) => tx.entry(summaryKind, c, summaryEntry("s", 20, 30, 0)));
      expect(await env.context(50)).toEqual([50, 30, 40]);
      const seed = await foldSectionState(storage, env.conv, 50);
      expect(seed.sections.map((s) => s.key)).toEqual(["pi.identity", "plugin.policy"]);
      const fresh = await env.generate({ at: 51 });
      expect(fresh.plan).toMatchObject({ kind: "baseline" });
      expect(fresh.entry!.edits).toBeUndefined(); // 11 is outside the retained range
      expect(fresh.entry!.data.sections).toContainEqual({
        key: "plugin.policy",
        action: "set",
        value: { level: "strict" },
        rendered: "<policy>level strict</policy>",
      });
      expect(messageOf(fresh.entry)!.sections).toEqual({
        "pi.identity": IDENTITY,
        "plugin.policy": "<policy>level strict</policy>",
      });
      expect(env.problems).toEqual([]);
      expect(env.failures).toEqual([]);
      // And again across a second head: the fresh baseline 51 carries it forward.
      await env.assistant(60);
      await env.user(70);
      await env.assistant(80);
      await env.at(90, (c) => (tx) => tx.entry(summaryKind, c, summaryEntry("s2", 60, 70, 0)));
      const second = await env.generate({ at: 91 });
      expect(second.entry!.data.sections!.map((s) => s.key)).toEqual(["pi.identity", "plugin.policy"]);
    }));

  it("§8.2 durable seed folds forward from the newest baseline at any target", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let level = 1;
      const counter = defineSystemSection<number>({ key: "counter", render: (n) => `n=${n}` });
      env.registry.register(counter);
      env.on(({ sections }) => void sections.set(counter, level));
      await env.user(10);
      await env.generate({ at: 11 });
      level = 2;
      await env.generate({ at: 12 });
      level = 3;
      await env.generate({ at: 13 });
      await env.assistant(20);
      const state = await foldSectionState(storage, env.conv, 20);
      expect(state).toMatchObject({ cursor: 13, sections: [{ key: "counter", value: 3, rendered: "n=3" }] });
      expect(await foldSectionState(storage, env.conv, 12)).toMatchObject({
        cursor: 12,
        sections: [{ key: "counter", value: 2 }],
      });
      expect(await foldSectionState(storage, env.conv, 10)).toMatchObject({ cursor: 0, sections: [] });
      expect(await sectionCursor(storage, env.conv, 20)).toBe(13);
    }));

  it("§8.2 a fold continues from the previous fold on the same storage: 40 unmanaged system entries later it reads only the new ones, not back to the baseline (issue 15)", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const env = await Env.open(storage);
      let level = 1;
      const counter = defineSystemSection<number>({ key: "counter", render: (n) => `n=${n}` });
      env.registry.register(counter);
      env.on(({ sections }) => void sections.set(counter, level));
      await env.user(10);
      await env.generate({ at: 11 });
      const notice = (id: Id) =>
        env.at(
          id,
          (c) => (tx) =>
            tx.entry(systemKind, c, {
              data: { note: `n${id}` },
              model: [{ role: "system", content: `notice ${id}`, timestamp: 0 }],
            }),
        );
      for (let id = 20; id < 60; id++) await notice(id);
      expect(await foldSectionState(storage, env.conv, storage.lastSeq)).toMatchObject({
        cursor: 11,
        sections: [{ key: "counter", value: 1 }],
      });
      for (let id = 60; id < 100; id++) await notice(id);
      level = 2;
      await env.generate({ at: 100 });
      await notice(101);
      storage.reset();
      const state = await foldSectionState(storage, env.conv, storage.lastSeq);
      expect(state).toMatchObject({ cursor: 100, sections: [{ key: "counter", value: 2 }] });
      expect(await sectionCursor(storage, env.conv, storage.lastSeq)).toBe(100);
      // Only the system entries after the previous fold's target (100 and 101, read once), never the
      // 80 notices back to the baseline at 11.
      expect(storage.reset()).toMatchObject({ scanEntries: 1, rows: 2 });
      // An earlier target than the last fold still folds correctly (read back to its baseline).
      expect(await foldSectionState(storage, env.conv, 59)).toMatchObject({
        cursor: 11,
        sections: [{ key: "counter", value: 1 }],
      });
    }));

  it("§8.2 durable seed is fork-aware: a fork sees its visible prefix, not the parent's later deltas", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let mode = false;
      env.registry.register(planModeSection);
      env.on(({ sections }) => void sections.set(planModeSection, mode));
      await env.user(10);
      await env.generate({ at: 11 });
      await env.assistant(20);
      mode = true;
      await env.generate({ at: 21 });
      const fork = await env.harness.commit(
        (tx) => tx.createConversation({ parent: { conversationId: env.conv, at: 20 } }),
        call,
      );
      const state = await foldSectionState(storage, fork, storage.lastSeq);
      expect(state).toMatchObject({ cursor: 11, sections: [{ key: "plan_mode", value: false }] });
      // The fork's next preparation writes its own delta against its own seed.
      const delta = await env.generate({ conv: fork });
      expect(delta.plan).toMatchObject({ kind: "delta" });
      expect(delta.entry!.conversationId).toBe(fork);
      expect(delta.entry!.data).toEqual({
        sections: [{ key: "plan_mode", action: "set", value: true, rendered: PLAN_ON }],
      });
    }));

  it("§8.2 a concurrent managed write since the seed makes the plan stale; a head alone does not", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let text = "one";
      env.on(({ sections }) => void sections.set(systemSections.identity, text));
      await env.user(10);
      await env.generate({ at: 11 });
      await env.assistant(20);
      text = "two";
      const stale = await env.generate({
        between: async () => {
          await env.harness.commit(
            (tx) =>
              tx.entry(systemKind, env.conv, {
                data: { sections: [{ key: "other", action: "set", value: 1, rendered: "other" }] },
                model: [],
              }),
            call,
          );
        },
      });
      expect(stale.plan).toEqual({ stale: true });
      // A head landing during preparation is not staleness: the plan turns into a fresh baseline.
      await env.user(30);
      text = "three";
      const headed = await env.generate({
        between: async () => {
          await env.harness.commit((tx) => tx.entry(summaryKind, env.conv, summaryEntry("s", 20, 30, 0)), call);
        },
      });
      expect(headed.plan).toMatchObject({ stale: false, kind: "baseline" });
      expect(headed.entry!.data.sections!.map((s) => s.key)).toEqual(["pi.identity", "other"]);
    }));

  // -------------------------------------------------------------------------------------------
  // Diffing

  it("§8.2 payload-only change -> data-only entry (model [])", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const envSection = defineSystemSection<{ cwd: string; scannedAt: number }>({
        key: "test.env",
        render: (e) => `cwd: ${e.cwd}`,
      });
      env.registry.register(envSection);
      let scannedAt = 1;
      env.on(({ sections }) => void sections.set(envSection, { cwd: "/w", scannedAt }));
      await env.user(10);
      await env.generate({ at: 11 });
      scannedAt = 2;
      const delta = await env.generate({ at: 12 });
      expect(delta.plan).toMatchObject({ kind: "delta" });
      expect(delta.entry!.model).toEqual([]);
      expect(delta.entry!.data).toEqual({
        sections: [{ key: "test.env", action: "set", value: { cwd: "/w", scannedAt: 2 }, rendered: "cwd: /w" }],
      });
      expect(await env.context(12)).toEqual([10, 11, 12]);
      expect(await foldSectionState(storage, env.conv, 12)).toMatchObject({
        sections: [{ value: { cwd: "/w", scannedAt: 2 } }],
      });
    }));

  it("§8.2 payload diff ignores object-key order; reorder alone emits nothing", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const obj = defineSystemSection<JsonObject>({ key: "obj", render: () => "obj" });
      env.registry.register(obj);
      let flip = false;
      env.on(({ sections }) => {
        if (!flip) {
          sections.set(systemSections.identity, IDENTITY);
          sections.set(obj, { a: 1, b: { c: 2, d: 3 } });
        } else {
          // Delete and re-add in the other order, keys reordered: same payloads and text.
          sections.delete(systemSections.identity);
          sections.delete("obj");
          sections.set(obj, { b: { d: 3, c: 2 }, a: 1 });
          sections.set(systemSections.identity, IDENTITY);
        }
      });
      await env.user(10);
      await env.generate({ at: 11 });
      flip = true;
      expect((await env.generate()).plan).toEqual({ stale: false, draft: undefined, kind: "none" });
    }));

  it("§8.2 set replaces in place and a new key appends; simultaneous changes use draft order", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let round = 0;
      env.on(({ sections }) => {
        sections.set(systemSections.identity, `id${round}`);
        sections.set(systemSections.environment, { cwd: "/w" });
        if (round > 0) {
          sections.set(systemSections.skills, [{ name: "pdf", description: "read pdfs" }]);
          sections.set(systemSections.identity, "id-final"); // in place, not moved
        }
      });
      await env.user(10);
      await env.generate({ at: 11 });
      round = 1;
      const delta = await env.generate({ at: 12 });
      expect(delta.entry!.data.sections!.map((s) => s.key)).toEqual(["pi.identity", "pi.skills"]);
      expect(Object.keys(messageOf(delta.entry)!.sections!)).toEqual(["pi.identity", "pi.skills"]);
      expect(messageOf(delta.entry)!.sections!["pi.skills"]).toBe("- pdf: read pdfs");
      const state = await foldSectionState(storage, env.conv, 12);
      expect(state.sections.map((s) => s.key)).toEqual(["pi.identity", "pi.environment", "pi.skills"]);
    }));

  // -------------------------------------------------------------------------------------------
  // The draft under handlers

  it("§8.2 failed handler discarded while earlier changes retained", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(({ sections }) => {
        sections.set(systemSections.identity, IDENTITY);
        sections.set(systemSections.skills, [{ name: "pdf", description: "read pdfs" }]);
        return { tools: [catalogue.read!] };
      });
      await env.user(10);
      await env.generate({ at: 11 });

      env.on(({ sections }) => {
        sections.set(systemSections.identity, "first handler");
        return { tools: [catalogue.read!, catalogue.grep!] };
      });
      env.on(({ sections }) => {
        sections.set(systemSections.identity, "failing handler");
        sections.delete(systemSections.skills); // a failed refresh must not publish a partial deletion
        sections.wrap(systemSections.identity, (t) => `<x>${t}</x>`);
        sections.set(systemSections.environment, { cwd: "/half" });
        throw new Error("refresh failed");
      });
      env.on(({ sections }) => void sections.set(systemSections.environment, { cwd: "/w" }));
      const { prepared } = await env.prepare();
      expect(env.failures).toHaveLength(1);
      expect(env.failures[0]).toMatchObject({ kind: "generation", point: "system_instructions" });
      expect(prepared.sections.map((s) => [s.key, s.rendered])).toEqual([
        ["pi.identity", "first handler"],
        ["pi.skills", "- pdf: read pdfs"],
        ["pi.environment", "<environment>\ncwd: /w\n</environment>"],
      ]);
      expect(prepared.tools.map((t) => t.name)).toEqual(["read", "grep"]);
    }));

  it("§8.7 scoped handlers run after harness-wide ones, so the conversation's sections win by key", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(({ sections }) => void sections.set(systemSections.identity, "child"), env.conv); // registered first
      env.on(({ sections }) => void sections.set(systemSections.identity, "host"));
      const { prepared } = await env.prepare();
      expect(prepared.sections).toEqual([{ key: "pi.identity", value: "child", rendered: "child" }]);
    }));

  it("§8.2 no accidental accumulation: a host base plus a get-and-set filter reaches a fixed point", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      env.on(({ sections }) => {
        sections.set(systemSections.skills, [
          { name: "a", description: "A" },
          { name: "b", description: "B" },
        ]);
      });
      env.on(({ sections }) => {
        const skills = sections.get(systemSections.skills) ?? [];
        sections.set(systemSections.skills, [...skills.filter((s) => s.name !== "b"), { name: "c", description: "C" }]);
      });
      await env.user(10);
      const first = await env.generate({ at: 11 });
      expect(first.entry!.data.sections).toEqual([
        {
          key: "pi.skills",
          action: "set",
          value: [
            { name: "a", description: "A" },
            { name: "c", description: "C" },
          ],
          rendered: "- a: A\n- c: C",
        },
      ]);
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
    }));

  it("§8.7 tools: the last supplied list wins, omission keeps an earlier list, none supplied means no tools", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      expect((await env.prepare()).prepared.tools).toEqual([]);
      env.on(() => ({ tools: [catalogue.read!] }));
      env.on(() => ({ tools: [catalogue.write!, catalogue.grep!] }));
      env.on(() => undefined);
      env.on(() => ({}));
      expect((await env.prepare()).prepared.tools.map((t) => t.name)).toEqual(["write", "grep"]);
      env.on(() => ({ tools: [] }));
      expect((await env.prepare()).prepared.tools).toEqual([]);
    }));

  it("§8.2 wrap composition in registration order, without mutating the shared token", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let wrapping = true;
      env.on(({ sections }) => void sections.set(systemSections.identity, "base"));
      env.on(({ sections }) => void (wrapping && sections.wrap(systemSections.identity, (t) => `<a>${t}</a>`)));
      env.on(({ sections }) => void (wrapping && sections.wrap(systemSections.identity, (t) => `${t}!`)));
      await env.user(10);
      const first = await env.generate({ at: 11 });
      expect(first.entry!.data.sections).toEqual([
        { key: "pi.identity", action: "set", value: "base", rendered: "<a>base</a>!" },
      ]);
      expect(systemSections.identity.render("base")).toBe("base");
      // Wrappers live only in one draft: without them the same payload renders anew (an instruction update).
      wrapping = false;
      const second = await env.generate({ at: 12 });
      expect(second.entry!.data).toEqual({
        sections: [{ key: "pi.identity", action: "set", value: "base", rendered: "base" }],
      });
      expect(messageOf(second.entry)!.sections).toEqual({ "pi.identity": "base" });
    }));

  it("§8.2 wrap of an untouched seeded section re-renders it from its payload", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let wrap = false;
      const dispose = env.on(({ sections }) => void sections.set(systemSections.environment, { cwd: "/w" }));
      env.on(({ sections }) => void (wrap && sections.wrap(systemSections.environment, (t) => t.toUpperCase())));
      await env.user(10);
      await env.generate({ at: 11 });
      dispose();
      wrap = true;
      const { prepared } = await env.prepare();
      expect(prepared.sections).toEqual([
        { key: "pi.environment", value: { cwd: "/w" }, rendered: "<ENVIRONMENT>\nCWD: /W\n</ENVIRONMENT>" },
      ]);
    }));

  it("§8.2 delete by string key removes a section whose renderer is unavailable", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const gone = defineSystemSection<string>({ key: "plugin.gone", render: (t) => `<gone>${t}</gone>` });
      env.registry.register(gone);
      env.on(({ sections }) => void sections.set(systemSections.identity, IDENTITY));
      const dispose = env.on(({ sections }) => void sections.set(gone, "hello"));
      await env.user(10);
      await env.generate({ at: 11 });
      dispose();
      env.registry.remove("plugin.gone");
      // Without the definition, typed access fails (the handler is skipped) but delete by key works.
      let getError: unknown;
      env.on(({ sections }) => {
        try {
          sections.get(gone);
        } catch (error) {
          getError = error;
        }
        sections.delete("plugin.gone");
      });
      const delta = await env.generate({ at: 12 });
      expect(getError).toMatchObject({ code: "not_found" });
      expect(delta.entry!.data).toEqual({ sections: [{ key: "plugin.gone", action: "remove" }] });
      expect(messageOf(delta.entry)).toEqual({
        role: "system",
        content: "",
        sections: { "plugin.gone": null },
        timestamp: 7,
      });
      expect((await foldSectionState(storage, env.conv, 12)).sections.map((s) => s.key)).toEqual(["pi.identity"]);
    }));

  it("§8.2 get/set/wrap need a registered definition; get returns an owned copy; the draft closes after preparation", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const unregistered = defineSystemSection<string>({ key: "nope", render: (t) => t });
      let leaked: SystemSectionDraft | undefined;
      const errors: unknown[] = [];
      env.on(({ sections }) => {
        sections.set(systemSections.skills, [{ name: "a", description: "A" }]);
        const copy = sections.get(systemSections.skills)!;
        copy.push({ name: "b", description: "B" }); // does not reach the draft
        for (const op of [
          () => sections.set(unregistered, "x"),
          () => sections.get(unregistered),
          () => sections.wrap(unregistered, (t) => t),
        ]) {
          try {
            op();
          } catch (error) {
            errors.push(error);
          }
        }
        leaked = sections;
      });
      const { prepared } = await env.prepare();
      expect(prepared.sections).toEqual([
        { key: "pi.skills", value: [{ name: "a", description: "A" }], rendered: "- a: A" },
      ]);
      expect(errors.map((e) => (e as { code?: string }).code)).toEqual(["not_found", "not_found", "not_found"]);
      expect(() => leaked!.set(systemSections.identity, "late")).toThrow(/after preparation/);
      expect(prepared.sections).toHaveLength(1);
    }));

  it("§9.6 register rejects duplicate keys; replace marks the section for re-rendering until acknowledged", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      expect(() =>
        env.registry.register(defineSystemSection<string>({ key: "pi.identity", render: (t) => t })),
      ).toThrow(/already registered/);
      expect(() => env.registry.replace(defineSystemSection<string>({ key: "missing", render: (t) => t }))).toThrow(
        /not registered/,
      );
      expect(env.registry.keys()).toEqual(["pi.identity", "pi.environment", "pi.skills"]);
      const dispose = env.on(({ sections }) => void sections.set(systemSections.identity, "hi"));
      await env.user(10);
      await env.generate({ at: 11 });
      dispose(); // untouched from now on: the stored text stays...
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
      // ...until the renderer is replaced: the next preparation recomputes it.
      env.registry.replace(
        defineSystemSection<string>({ key: "pi.identity", render: (t) => `<identity>${t}</identity>` }),
      );
      const delta = await env.generate({ at: 12 });
      expect(delta.entry!.data).toEqual({
        sections: [{ key: "pi.identity", action: "set", value: "hi", rendered: "<identity>hi</identity>" }],
      });
      expect(env.registry.snapshot().recompute.size).toBe(0); // acknowledged after the commit
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
    }));

  it("§8.2 a throwing renderer keeps the stored section and reports it", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let explode = false;
      const fragile = defineSystemSection<number>({
        key: "fragile",
        render: (n) => {
          if (explode) throw new Error("boom");
          return `n=${n}`;
        },
      });
      env.registry.register(fragile);
      let n = 1;
      env.on(({ sections }) => void sections.set(fragile, n));
      await env.user(10);
      await env.generate({ at: 11 });
      explode = true;
      n = 2;
      const { prepared } = await env.prepare();
      expect(prepared.sections).toEqual([{ key: "fragile", value: 1, rendered: "n=1" }]);
      expect(env.problems).toMatchObject([{ type: "render_failed", key: "fragile" }]);
    }));

  // -------------------------------------------------------------------------------------------
  // Tools

  it("§8.2 tool add/replace/remove diff: upserts by name, removals carry the previous complete definition", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      let tools: Tool[] = [catalogue.read!, catalogue.write!];
      env.on(({ sections }) => {
        sections.set(systemSections.identity, IDENTITY);
        return { tools };
      });
      await env.user(10);
      await env.generate({ at: 11 });
      // Same definitions with object keys in another order: no change.
      tools = [
        {
          parameters: { properties: { path: { type: "string" } }, type: "object" },
          description: "read a file",
          name: "read",
        },
        {
          description: "write a file",
          name: "write",
          parameters: { type: "object", properties: { path: { type: "string" } } },
        },
      ];
      expect((await env.generate()).plan).toMatchObject({ kind: "none" });
      const read2 = tool("read", "read a file", {
        type: "object",
        properties: { path: { type: "string" }, limit: { type: "number" } },
      });
      tools = [read2, catalogue.grep!];
      const delta = await env.generate({ at: 12 });
      expect(delta.entry!.data).toEqual({ sections: [] });
      expect(messageOf(delta.entry)).toEqual({
        role: "system",
        content: "",
        toolsAdded: [read2, catalogue.grep],
        toolsRemoved: [catalogue.write],
        timestamp: 7,
      });
      const state = await foldSectionState(storage, env.conv, 12);
      expect(state.tools).toEqual([read2, catalogue.grep]);
    }));

  it("§8.2 tool fold includes non-managed system messages; a fresh baseline removes their unwanted declarations explicitly", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      const legacy = tool("legacy", "an adapter-declared tool");
      env.on(({ sections }) => {
        sections.set(systemSections.identity, IDENTITY);
        return { tools: [catalogue.read!] };
      });
      await env.user(10);
      await env.generate({ at: 11 });
      await env.assistant(20);
      await env.user(30);
      // A plugin's own (non-managed) system message declares tools inside the retained range.
      await env.at(
        31,
        (c) => (tx) =>
          tx.entry(systemKind, c, {
            data: { plugin: "x" },
            model: [{ role: "system", content: "", toolsAdded: [legacy, catalogue.read!], timestamp: 0 }],
          }),
      );
      // Delta path: read is already effective (identical), legacy is unwanted.
      const delta = await env.generate({ at: 32 });
      expect(messageOf(delta.entry)).toEqual({ role: "system", content: "", toolsRemoved: [legacy], timestamp: 7 });
      // A head: 11 and 32 are superseded; 31 (non-managed) stays and its legacy declaration is removed again
      // explicitly because 32's removal is omitted with it.
      await env.assistant(40);
      await env.at(50, (c) => (tx) => tx.entry(summaryKind, c, summaryEntry("s", 20, 30, 0)));
      const baseline = await env.generate({ at: 51 });
      expect(baseline.entry!.edits).toEqual([{ target: 32, action: "omit" }]);
      expect(messageOf(baseline.entry)).toEqual({
        role: "system",
        content: "",
        sections: { "pi.identity": IDENTITY },
        toolsAdded: [catalogue.read],
        toolsRemoved: [legacy],
        timestamp: 7,
      });
      expect(await env.context(51)).toEqual([50, 30, 31, 40, 51]);
    }));

  it("§8.2 nothing desired and nothing stored writes no empty baseline", () =>
    run(async (storage) => {
      const env = await Env.open(storage);
      await env.user(10);
      const plan = await env.generate();
      expect(plan.plan).toEqual({ stale: false, draft: undefined, kind: "none" });
    }));
});
