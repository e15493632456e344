/**
 * The turn kit: the built-in turn kinds (generation, tool, post_tools, collapse, job, schedule) built over one set
 * of services, and the handle-level turn API (accept, prompt, collapse, reset) installed on a harness.
 *
 * @example
 * const kit = createTurnKit({ models, tools: [echoTool] });
 * const h = await Harness.open(storage, { taskKinds: kit.kinds, rootValues }, call);
 * kit.install(h);
 * const answer = await (await h.root(call)).prompt({ input: "hi" }, call);
 */
import type { Models, Tool } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { AcceptOptions, AcceptReceipt, TurnApi } from "../core/conversation.js";
import { handoffEntry, handoffKind, resetEntry, resetKind } from "../core/entries.js";
import { PicoError } from "../core/errors.js";
import { invocationOf } from "../core/driver.js";
import type { Harness } from "../core/harness.js";
import { HookRegistry, type HookFailure } from "../core/hooks.js";
import { bindResult, writeEntry } from "../core/inbox.js";
import { erase, type AnyTaskKind } from "../core/task-kind.js";
import { watchHub } from "../core/watch.js";
import type { EntryDraft } from "../core/entries.js";
import type { Entry, Id } from "../storage/records.js";
import { createCollapseKind, planCollapse } from "./collapse.js";
import { createGenerationKind } from "./generation.js";
import { configFrom, freshRetry } from "./config.js";
import { acceptInput, createGeneration, foregroundTurn } from "./placement.js";
import { createPostToolsKind } from "./post-tools.js";
import { SectionRegistry } from "./sections.js";
import {
  defaultTurnOptions,
  modelResolver,
  ToolRegistry,
  type AnyTool,
  type FinalAnswerExtension,
  type TurnOptions,
} from "./services.js";
import { createToolKind } from "./tool.js";
import type { ExecutionEnv } from "./exec-env.js";
import { FakeExecutionEnv } from "./exec-fake.js";
import { createJobKind } from "./job.js";
import { createScheduleKind, type ScheduleServices } from "./schedule.js";
import { systemClock } from "../core/host.js";
import type { ToolCatalog } from "./catalog-types.js";
import type { RemoteCallServices } from "./remote-call-state.js";
import { createRemoteCallKind } from "./remote-call.js";

export interface TurnSetup {
  readonly models: Models;
  readonly tools?: readonly AnyTool[];
  readonly sections?: SectionRegistry;
  readonly hooks?: HookRegistry;
  readonly options?: Partial<TurnOptions>;
  readonly reportHookFailure?: (failure: HookFailure) => void;
  /** Where jobs run (§8.6); default the scripted fake on the system clock. */
  readonly env?: ExecutionEnv;
  /** Called in the commit that accepts a schedule's occurrence (the host indexes the input). */
  readonly scheduleAccepted?: ScheduleServices["accepted"];
  /** Asked before a schedule's occurrence accepts its input (the tenant's limits). */
  readonly scheduleAdmit?: ScheduleServices["admit"];
  /**
   * Consulted in the commit that records a final answer, before queued items are placed (services.ts
   * FinalAnswerBoundary).
   */
  readonly finalAnswer?: FinalAnswerExtension;
  /** The tenant's tool catalog, answered from memory (catalog-types.ts). */
  readonly catalog?: ToolCatalog;
  /** Where remote calls leave the object (remote-call-state.ts). */
  readonly remote?: RemoteCallServices;
  /** The session's incarnation (incarnation.ts), named in pending ids. */
  readonly incarnation?: () => string | undefined;
}

export interface TurnKit {
  readonly kinds: readonly AnyTaskKind[];
  readonly hooks: HookRegistry;
  readonly tools: ToolRegistry;
  readonly sections: SectionRegistry;
  readonly options: TurnOptions;
  readonly generation: ReturnType<typeof createGenerationKind>;
  readonly tool: ReturnType<typeof createToolKind>;
  readonly postTools: ReturnType<typeof createPostToolsKind>;
  readonly collapse: ReturnType<typeof createCollapseKind>;
  readonly job: ReturnType<typeof createJobKind>;
  readonly schedule: ReturnType<typeof createScheduleKind>;
  readonly remoteCall: ReturnType<typeof createRemoteCallKind>;
  readonly env: ExecutionEnv;
  /** Install the turn API on a harness opened with `kinds`. */
  install(harness: Harness): void;
}

export function createTurnKit(setup: TurnSetup): TurnKit {
  const options: TurnOptions = { ...defaultTurnOptions, ...setup.options };
  // Fail-open hook failures are reported and skipped (§8.7): to the setup's reporter and, once the kit
  // is installed, to the harness's session watchers as `report` events naming the task (§9.4).
  let installed: Harness | undefined;
  const hooks =
    setup.hooks ??
    new HookRegistry((failure, call) => {
      setup.reportHookFailure?.(failure);
      if (installed === undefined) return;
      const task = invocationOf(call)?.taskId;
      watchHub(installed).report({
        ...(task === undefined ? {} : { task }),
        kind: failure.kind,
        method: failure.point,
        error: describeError(failure.error),
      });
    });
  const tools = new ToolRegistry(setup.tools ?? []);
  const sections = setup.sections ?? new SectionRegistry();
  const services = {
    models: modelResolver(setup.models),
    tools,
    hooks,
    options,
    sections,
    ...(setup.finalAnswer === undefined ? {} : { finalAnswer: setup.finalAnswer }),
    ...(setup.catalog === undefined ? {} : { catalog: setup.catalog }),
    ...(setup.remote === undefined ? {} : { remote: setup.remote }),
    ...(setup.incarnation === undefined ? {} : { incarnation: setup.incarnation }),
  };
  const generation = createGenerationKind(services);
  // Tool registration never selects tools (§9.5), and no supplied list means no desired tools (§8.2):
  // this harness-wide handler, registered before any host or plugin handler, offers the complete
  // definitions of the generation's captured selection. A later handler's list wins (§8.7).
  // A selection naming a catalog tool refreshes the session's copy of the catalog first (at most once per
  // its time-to-live); a session of built-in tools only never reads it.
  hooks.on(generation, "system_instructions", async ({ config }) => {
    const catalog = setup.catalog;
    if (catalog !== undefined && config.tools.some((name) => tools.get(name) === undefined)) await catalog.refresh({});
    const selected = selectedDefinitions(tools, config.tools, catalog);
    // The page's tools for this turn (run-tools.ts) after the selection; a selected name is never shadowed.
    const page = (config.runTools ?? []).filter((tool) => !selected.some((s) => s.name === tool.name));
    return { tools: [...selected, ...page.map((tool) => ({ ...tool }) as Tool)] };
  });
  const tool = createToolKind(services);
  const postTools = createPostToolsKind(services);
  const collapse = createCollapseKind(services);
  const env = setup.env ?? new FakeExecutionEnv({ clock: systemClock });
  const job = createJobKind({ env, flushMs: options.flushMs });
  const schedule = createScheduleKind({
    turn: options,
    ...(setup.scheduleAccepted === undefined ? {} : { accepted: setup.scheduleAccepted }),
    ...(setup.scheduleAdmit === undefined ? {} : { admit: setup.scheduleAdmit }),
  });
  // HTTP tools' requests (remote-call.ts); without remote services a call settles no_tenant.
  const remoteCall = createRemoteCallKind(setup.remote);
  return {
    kinds: [
      erase(generation),
      erase(tool),
      erase(postTools),
      erase(collapse),
      erase(job),
      erase(schedule),
      erase(remoteCall),
    ],
    hooks,
    tools,
    sections,
    options,
    generation,
    tool,
    postTools,
    collapse,
    job,
    schedule,
    remoteCall,
    env,
    install(harness) {
      installed = harness;
      // The harness's h.sections changes this registry on the line (§9.6); generations snapshot it.
      harness.useSections(sections);
      harness.turns = turnApi(harness, options, hooks, generation);
    },
  };
}

/** A hook error as watchers receive it: JSON on the wire, so an Error becomes its name and message. */
function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * The pi-ai definitions (name, description, parameters) of the selected tools that exist: registered
 * tools first, then the catalog's live tools (a deleted catalog tool is not offered).
 */
export function selectedDefinitions(tools: ToolRegistry, selected: readonly string[], catalog?: ToolCatalog): Tool[] {
  return selected.flatMap((name) => {
    const tool = tools.get(name) ?? catalog?.offer(name);
    return tool === undefined
      ? []
      : [{ name: tool.name, description: tool.description, parameters: tool.parameters } as Tool];
  });
}

function turnApi(
  harness: Harness,
  options: TurnOptions,
  hooks: HookRegistry,
  generation: TurnApi["generation"],
): TurnApi {
  const accept = (conversationId: Id, input: AcceptOptions, call: Call, driving = false): Promise<AcceptReceipt> =>
    harness.commitBound(call, { conversationId }, async (b) => {
      // prompt drives after accepting: a known self-wait rejects before the acceptance (§6.2), on the
      // line so nothing can change between the check and the commit.
      if (driving) harness.driver.checkDrive(conversationId, call);
      const receipt = await acceptInput(b, conversationId, input, options, harness.now());
      return { inputId: receipt.inputId, status: receipt.status };
    });
  return {
    hooks,
    generation,
    // A spawned child's first generation (§4.3): its config comes from the values the creating commit
    // wrote, which storage does not see until that commit lands.
    firstGeneration: async (b, conversationId, inputs, initial) =>
      createGeneration(
        b,
        conversationId,
        inputs,
        await configFrom(initial, conversationId, options),
        freshRetry(options),
      ),
    accept: (conversationId, input, call) => accept(conversationId, input, call),
    async prompt(conversationId, input, call): Promise<Entry | undefined> {
      const { inputId } = await accept(conversationId, input, call, true);
      const handle = await harness.conversation(conversationId, call);
      if (handle === undefined) throw new PicoError("not_found", `conversation ${conversationId} does not exist`);
      await handle.drive(call);
      const result = (await harness.storage.getValue(bindResult(conversationId, inputId)))?.value;
      if (result?.status !== "done" || result.answer === undefined) return undefined;
      return harness.getEntry(result.answer, call);
    },
    async collapse(conversationId, collapseOptions, call) {
      const handle = await harness.conversation(conversationId, call);
      if (handle === undefined) throw new PicoError("not_found", `conversation ${conversationId} does not exist`);
      return harness.commitBound(call, { conversationId }, async (b) => {
        const context = await handle.contextEntries(undefined, call);
        const id = await planCollapse(
          b,
          conversationId,
          context,
          "manual",
          null,
          options.collapseKeepEntries,
          collapseOptions?.instructions ?? null,
        );
        if (id === undefined) {
          throw new PicoError(
            "conflict",
            `nothing to collapse in conversation ${conversationId}: the context is shorter than the retained tail, or a collapse is already running`,
          );
        }
        return id;
      });
    },
    async reset(conversationId, resetOptions, call) {
      await harness.commitBound(call, { conversationId }, async (b) => {
        const draft: EntryDraft & { kind: string } =
          resetOptions?.handoff === undefined
            ? { kind: resetKind.kind, ...resetEntry() }
            : { kind: handoffKind.kind, ...handoffEntry(resetOptions.handoff, harness.now()) };
        const { kind, ...entry } = draft;
        // A head mid-exchange would cut it in half (§8.3), so a reset waits for the boundary while a
        // foreground turn is live. A bare reset carries no model, so a background turn task alone (a
        // manual collapse) does not hold it: it lands now, and the collapse's summary becomes stale
        // (§8.4) instead of the reset waiting for a boundary no one will reach. A handoff carries a
        // model and follows §5.8.
        const busy = entry.model === undefined ? await foregroundTurn(b, conversationId) : b.inTurn(conversationId);
        writeEntry(b, conversationId, kind, entry, busy);
      });
    },
  };
}
