/**
 * What the HTTP API does inside one session Durable Object: the operations behind the routes, over an
 * open Harness and its turn kit. The SessionObject's RPC methods call these and return their results
 * (or problems) as `Outcome`s; the Worker has already validated every input (src/worker/schemas.ts).
 *
 * Nothing here writes before it has resolved everything it names: a missing conversation, input or task
 * is a problem before any commit, so a bad request writes nothing.
 *
 * One concept over 400 lines: the session's operations behind the routes (SessionApi). Each resolves
 * everything it names before it writes.
 */
import type { Models } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import type { ConversationHandle } from "../../core/conversation.js";
import type { UserInput } from "../../core/entries.js";
import type { Harness } from "../../core/harness.js";
import type { TxBuilder } from "../../core/tx.js";
import { bindInbox, bindResult, isTerminalResult, priorAcceptance, queueInput, type Acceptance, type InputResult, type QueuedInput } from "../../core/inbox.js";
import { bind, bindTo, sessionValue, withKey, type ValueSpec } from "../../core/state.js";
import { childrenList } from "../../core/spawn.js";
import {
  checkEdit,
  DEFAULT_CATCH_UP,
  InvalidSchedule,
  mergeEdit,
  newSchedule,
  scheduleDefinition,
  scheduleEdit,
  schedulePaused,
  type ScheduleCatchUp,
  type ScheduleEdit,
  type ScheduleMode,
  type ScheduleSpec,
  type ScheduleState,
} from "../../kinds/schedule.js";
import { generationConfig, type OnInterrupt } from "../../kinds/config.js";
import { acceptInput, continueInbox, type WhenBusy } from "../../kinds/placement.js";
import { waitingInputs } from "../../kinds/waiting.js";
import { modelResolver } from "../../kinds/services.js";
import type { UsageRow, UsageTotals } from "../../kinds/states.js";
import type { TurnKit } from "../../kinds/turns.js";
import { readUsageRow, usageList, usageTotals } from "../../kinds/usage.js";
import { presentEntry, presentTask } from "../../kinds/stored.js";
import type { Conversation, Element, Entry, Id, JsonValue, Page, Task } from "../../storage/records.js";
import type { AcceptResponse, ConfigValues, ConversationSnapshot, SessionConfig, SessionSummary, UsageReport } from "../../api/responses.js";
import { Problem } from "../problems.js";
import type { SessionConfigBody } from "../schemas.js";
import type { ToolCatalog } from "../../kinds/catalog-types.js";
import { selectableTools } from "./tool-catalog.js";

export type { AcceptResponse, ConfigValues, ConversationSnapshot, SessionConfig, SessionSummary, UsageReport, WaitingElement } from "../../api/responses.js";

/** A stored create config; sessions created before `onInterrupt` existed have the default. */
export function storedConfig(stored: Omit<SessionConfig, "onInterrupt"> & { readonly onInterrupt?: OnInterrupt }): SessionConfig {
  return { ...stored, onInterrupt: stored.onInterrupt ?? "retry" };
}

/** The create config, stored in the creating commit so a later PUT can be compared with it. */
export const createConfigValue: ValueSpec<SessionConfig> = sessionValue<SessionConfig>("edge.session.config");

/** A schedule as the HTTP API shows it. */
export interface ScheduleView {
  readonly id: Id;
  readonly conversationId: Id;
  readonly input: string;
  readonly mode: ScheduleMode;
  readonly every: number | null;
  readonly cron: string | null;
  readonly timezone: string | null;
  readonly status: "active" | "paused" | "ended";
  readonly nextRunAt: number | null;
  readonly lastRunAt: number | null;
  readonly lastInputId: Id | null;
  readonly catchUp: ScheduleCatchUp;
  readonly runs: number;
  readonly skipped: number;
  readonly skippedCapped: boolean;
}

export interface ScheduleRequest {
  readonly conversation: ConversationRef;
  readonly input: string;
  readonly every?: number;
  readonly cron?: string;
  readonly timezone?: string;
  readonly startAt?: number;
  readonly mode?: ScheduleMode;
  readonly catchUp?: ScheduleCatchUp;
}

/** PATCH /schedules/{id}: pause or resume, and/or edit what the schedule does. */
export interface SchedulePatch extends ScheduleEdit {
  readonly paused?: boolean;
}

/** How long PATCH /schedules/{id} waits for the schedule to apply the change in its own commit. */
const SCHEDULE_APPLY_BUDGET_MS = 5000;

/**
 * The worker's acceptance index: which conversation an input accepted over HTTP went to, so
 * `GET inputs/{id}` is one point read, and the hash of the request that accepted it under an
 * Idempotency-Key, so a reuse of the key with another body is refused (the HTTP layer's rule; the core's
 * `acceptance()` compares nothing, §3.4).
 */
export interface InputIndexEntry {
  readonly conversationId: Id;
  readonly requestHash?: string;
}
const inputIndexBase = sessionValue<InputIndexEntry>("edge.input");
export function inputIndex(inputId: Id): ValueSpec<InputIndexEntry> {
  return withKey(inputIndexBase, String(inputId));
}

/** Request keys from different sources live in separate namespaces (§3.4, docs/api.md "Idempotency-Key"). */
export type RequestSource =
  | { readonly type: "idempotency"; readonly key: string }
  | { readonly type: "webhook"; readonly id: string }
  | { readonly type: "inbound"; readonly endpoint: string; readonly id: string };

export function requestId(source: RequestSource): string {
  switch (source.type) {
    case "idempotency":
      return `idem:${source.key}`;
    case "webhook":
      return `webhook:${source.id}`;
    case "inbound":
      // The endpoint name cannot contain ":", so no two (endpoint, id) pairs share a key.
      return `inbound:${source.endpoint}:${source.id}`;
    default: {
      const never: never = source;
      return never;
    }
  }
}

export type ConversationRef = "root" | Id;

export interface AcceptRequest {
  readonly input: UserInput;
  readonly mode?: "steer" | "followUp" | "nextRun";
  readonly whenBusy?: WhenBusy;
  readonly source?: RequestSource;
  /**
   * With an idempotency source: the hash of the request body. A prior acceptance of the same key with
   * another hash, or on another conversation, is 422 `idempotency_key_reused` (IETF Idempotency-Key).
   */
  readonly requestHash?: string;
  /** Wait up to this many seconds for a terminal result. */
  readonly waitSeconds?: number;
}

const call: Call = BACKGROUND_CONTEXT;

/** Canonical JSON (sorted keys), for comparing configs. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** A create's config with the defaults filled in (`model`: the deployment's default model). */
export function normalizeConfig(body: SessionConfigBody, model: string): SessionConfig {
  return {
    model: body.model ?? model,
    selectedTools: body.selectedTools ?? ["echo"],
    ...(body.thinking === undefined ? {} : { thinking: body.thinking }),
    ...(body.profile === undefined ? {} : { profile: body.profile }),
    ...(body.budgetMs === undefined ? {} : { budgetMs: body.budgetMs }),
    onInterrupt: body.onInterrupt ?? "retry",
  };
}

/** Check that a model id resolves and tools are registered (before anything is written). */
export function checkConfig(models: Models, toolNames: readonly string[], config: ConfigValues): void {
  if (config.model !== undefined && modelResolver(models).resolve(config.model) === undefined) {
    const known = models.getModels().map((m) => `${m.provider}/${m.id}`);
    throw new Problem("unknown_model", `model ${config.model} is not available here (known: ${known.slice(0, 20).join(", ")}${known.length > 20 ? ", ..." : ""})`, "model");
  }
  for (const [i, name] of (config.selectedTools ?? []).entries()) {
    if (!toolNames.includes(name)) throw new Problem("unknown_tool", `tool ${name} is not registered (registered: ${toolNames.join(", ")})`, `selectedTools.${i}`);
  }
}

/**
 * The Idempotency-Key rule (IETF draft): a key names one request. Its reuse on another conversation, or
 * with another body, throws before anything is written. An acceptance indexed without a hash (before
 * hashes were kept) is matched on the conversation only.
 */
async function checkReuse(b: TxBuilder, prior: Acceptance, conversationId: Id, requestHash: string | undefined): Promise<void> {
  if (prior.conversationId !== conversationId) {
    throw new Problem("idempotency_key_reused", `this Idempotency-Key was used on conversation ${prior.conversationId}; use a new key for a new request`, "idempotency-key");
  }
  const indexed = await b.value(inputIndex(prior.inputId)).get();
  if (requestHash !== undefined && indexed?.requestHash !== undefined && indexed.requestHash !== requestHash) {
    throw new Problem("idempotency_key_reused", "this Idempotency-Key was used with a different body; use a new key for a new request", "idempotency-key");
  }
}

export class SessionApi {
  readonly #harness: Harness;
  readonly #kit: TurnKit;
  readonly #models: Models;
  /** The tenant's tool catalog (session/tool-catalog.ts): a selection may name its tools. */
  readonly #catalog: ToolCatalog | undefined;

  constructor(harness: Harness, kit: TurnKit, models: Models, catalog?: ToolCatalog) {
    this.#harness = harness;
    this.#kit = kit;
    this.#models = models;
    this.#catalog = catalog;
  }

  get harness(): Harness {
    return this.#harness;
  }

  async summary(): Promise<SessionSummary> {
    const storage = this.#harness.storage;
    const stored = (await storage.getValue(bindTo(createConfigValue, this.#harness.rootId)))?.value;
    const config = stored === undefined ? undefined : storedConfig(stored);
    const live = await storage.scanTasks({ live: true, limit: 1000 });
    return { config, rootConversationId: this.#harness.rootId, lastSeq: storage.lastSeq, liveTasks: live.items.length };
  }

  async conversation(ref: ConversationRef): Promise<ConversationHandle> {
    const id = ref === "root" ? this.#harness.rootId : ref;
    const handle = await this.#harness.conversation(id, call);
    if (handle === undefined) throw new Problem("conversation_not_found", `conversation ${id} does not exist`, "conversation");
    // A deleted conversation's cached handle must not answer.
    const record = (await this.#harness.storage.getConversations([id])).get(id);
    if (record === undefined) {
      this.#harness.release(id);
      throw new Problem("conversation_not_found", `conversation ${id} does not exist`, "conversation");
    }
    return handle;
  }

  // inputs ---------------------------------------------------------------------------------------

  async accept(ref: ConversationRef, request: AcceptRequest): Promise<AcceptResponse> {
    const handle = await this.conversation(ref);
    const conversationId = handle.id;
    const key = request.source === undefined ? undefined : requestId(request.source);
    const receipt = await this.#harness.commitBound(call, { conversationId }, async (b) => {
      const prior = await priorAcceptance(b, key);
      if (prior !== undefined) {
        if (request.source?.type === "idempotency") await checkReuse(b, prior, conversationId, request.requestHash);
        return { inputId: prior.inputId, conversationId: prior.conversationId, duplicate: true };
      }
      let inputId: Id;
      if (request.mode === undefined) {
        const accepted = await acceptInput(
          b,
          conversationId,
          { input: request.input, ...(key === undefined ? {} : { requestId: key }), ...(request.whenBusy === undefined ? {} : { whenBusy: request.whenBusy }) },
          this.#kit.options,
          this.#harness.now(),
        );
        inputId = accepted.inputId;
      } else {
        const item: QueuedInput = { mode: request.mode, input: request.input, ...(key === undefined ? {} : { requestId: key }) };
        inputId = queueInput(b, conversationId, item);
      }
      b.value(inputIndex(inputId)).set({ conversationId, ...(request.requestHash === undefined ? {} : { requestHash: request.requestHash }) });
      return { inputId, conversationId, duplicate: false };
    });
    let result = await this.#result(receipt.conversationId, receipt.inputId);
    if (request.waitSeconds !== undefined && request.waitSeconds > 0 && !isTerminalResult(result)) {
      result = await this.#waitResult(receipt.conversationId, receipt.inputId, request.waitSeconds * 1000);
    }
    const stored = request.waitSeconds !== undefined && result?.status === "done" && result.answer !== undefined ? await this.#harness.getEntry(result.answer, call) : undefined;
    const answer = stored === undefined ? undefined : presentEntry(stored);
    return {
      inputId: receipt.inputId,
      conversationId: receipt.conversationId,
      status: result?.status ?? "queued",
      duplicate: receipt.duplicate,
      result,
      ...(answer === undefined ? {} : { answer }),
    };
  }

  async input(inputId: Id): Promise<{ inputId: Id; conversationId: Id; result: InputResult }> {
    const conversationId = await this.#inputConversation(inputId);
    const result = conversationId === undefined ? undefined : await this.#result(conversationId, inputId);
    if (conversationId === undefined || result === undefined) throw new Problem("input_not_found", `input ${inputId} does not exist`, "inputId");
    return { inputId, conversationId, result };
  }

  async withdraw(inputId: Id): Promise<{ inputId: Id; conversationId: Id; result: InputResult }> {
    const { conversationId, result } = await this.input(inputId);
    if (result.status !== "queued") throw new Problem("input_not_queued", `input ${inputId} is ${result.status}, not queued; only a queued input can be withdrawn`);
    const handle = await this.conversation(conversationId);
    const outcome = await handle.abortInput(inputId, call);
    if (outcome === "not_found") throw new Problem("input_not_queued", `input ${inputId} was placed before it could be withdrawn`);
    return this.input(inputId);
  }

  async acceptance(source: RequestSource): Promise<Acceptance> {
    const found = await this.#harness.acceptance(requestId(source), call);
    if (found === undefined) throw new Problem("acceptance_not_found", "no input was accepted with this request key", "requestKey");
    return found;
  }

  /**
   * The conversation an input belongs to: the index every HTTP and webhook accept writes, else the root
   * (inputs queued by code inside the session). Never a scan: an unknown id costs two point reads.
   */
  async #inputConversation(inputId: Id): Promise<Id | undefined> {
    const storage = this.#harness.storage;
    const indexed = (await storage.getValue(bindTo(inputIndex(inputId), this.#harness.rootId)))?.value;
    if (indexed !== undefined) return indexed.conversationId;
    const root = this.#harness.rootId;
    return (await storage.getValue(bindResult(root, inputId))) === undefined ? undefined : root;
  }

  async #result(conversationId: Id, inputId: Id): Promise<InputResult | undefined> {
    return (await this.#harness.storage.getValue(bindResult(conversationId, inputId)))?.value;
  }

  /** Re-read the result after each commit until it is terminal or the time is up. */
  #waitResult(conversationId: Id, inputId: Id, ms: number): Promise<InputResult | undefined> {
    return new Promise((resolve) => {
      let checking = false;
      let again = false;
      let done = false;
      const finish = (result: InputResult | undefined): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        stop();
        resolve(result);
      };
      const check = (): void => {
        if (checking) {
          again = true;
          return;
        }
        checking = true;
        void this.#result(conversationId, inputId).then(
          (result) => {
            checking = false;
            if (isTerminalResult(result)) finish(result);
            else if (again) {
              again = false;
              check();
            }
          },
          () => {
            checking = false;
          },
        );
      };
      const timer = setTimeout(() => void this.#result(conversationId, inputId).then(finish, () => finish(undefined)), ms);
      const stop = this.#harness.onCommit(() => check());
      check();
    });
  }

  // conversations --------------------------------------------------------------------------------

  async snapshot(ref: ConversationRef): Promise<ConversationSnapshot> {
    const handle = await this.conversation(ref);
    const storage = this.#harness.storage;
    const conversation = await handle.snapshot(call);
    const tasks = await storage.scanTasks({ conversationIds: [handle.id], live: true, limit: 1000 });
    const inbox = await storage.readList<QueuedInput>(bindInbox(handle.id), { limit: 1000 });
    const waiting = new Set((await storage.getValue(bindTo(waitingInputs, handle.id)))?.value ?? []);
    const ownerTask = conversation.owner === undefined ? undefined : (await storage.getTasks([conversation.owner])).get(conversation.owner);
    const children = await storage.readList<Id>(bindTo(childrenList, handle.id), { limit: 1000 });
    return {
      conversation,
      owner: ownerTask === undefined ? null : { taskId: ownerTask.id, conversationId: ownerTask.conversationId },
      children: children.items.map((element) => element.value),
      config: await this.config(handle.id),
      tasks: tasks.items.map(presentTask),
      inbox: inbox.items.map((element) => ({ ...element, waiting: waiting.has(element.id) })),
      readAt: storage.lastSeq,
    };
  }

  /**
   * POST .../continue: place the queued steer/followUp items (waiting after a group ended without a
   * final answer) into a new group with its generation, in one commit. A live turn places them itself
   * (in_turn); nothing queued is nothing_waiting. Both write nothing.
   */
  async continue(ref: ConversationRef): Promise<{ inputs: Id[]; generation: Id }> {
    const handle = await this.conversation(ref);
    const conversationId = handle.id;
    return this.#harness.commitBound(call, { conversationId }, async (b) => {
      if (b.inTurn(conversationId)) {
        throw new Problem("in_turn", `conversation ${conversationId} has a live turn; its queued inputs are placed at that turn's next boundary`);
      }
      const placed = await continueInbox(b, conversationId, this.#kit.options, this.#harness.now());
      if (placed === undefined) throw new Problem("nothing_waiting", `conversation ${conversationId} has no queued steer or followUp input to continue with`);
      return placed;
    });
  }

  /** A transcript page as clients see it: tool result data whole (`presentEntry`, §9.3), stored compact. */
  async entries(ref: ConversationRef, query: { before?: Id; after?: Id; limit?: number; kind?: string }): Promise<Page<Entry>> {
    const handle = await this.conversation(ref);
    const page = await this.#harness.storage.scanEntries({
      conversationId: handle.id,
      limit: query.limit ?? 50,
      ...(query.before === undefined ? {} : { before: query.before }),
      ...(query.after === undefined ? {} : { after: query.after }),
      ...(query.kind === undefined ? {} : { kind: query.kind }),
    });
    return { ...page, items: page.items.map(presentEntry) };
  }

  async abort(ref: ConversationRef): Promise<void> {
    const handle = await this.conversation(ref);
    await handle.abort(call);
  }

  /**
   * Delete a non-root conversation with its ownership subtree (§6.4): 409 `busy` while anything in the
   * subtree runs, 409 `conflict` for the root (it goes with its session); nothing is written then.
   */
  async deleteConversation(ref: ConversationRef): Promise<{ deleted: Id[] }> {
    const handle = await this.conversation(ref);
    if (handle.id === this.#harness.rootId) {
      throw new Problem("conflict", "the root conversation is deleted with its session (DELETE /v1/sessions/{session})", "conversation");
    }
    if (this.#harness.driver.subtreeBusy(handle.id)) {
      throw new Problem("busy", `conversation ${handle.id} has running work in its subtree (it or a conversation it owns); abort it or wait until it settles`, "conversation");
    }
    const deleted = await this.#harness.deleteConversation(handle.id, call);
    return { deleted };
  }

  async fork(ref: ConversationRef, options: { at: Id | "start"; abort?: boolean }): Promise<{ conversationId: Id; conversation: Conversation }> {
    const handle = await this.conversation(ref);
    if (options.at !== "start") {
      const entry = await this.#harness.getEntry(options.at, call);
      if (entry === undefined) throw new Problem("entry_not_found", `entry ${options.at} does not exist`, "at");
    }
    const child = await handle.fork({ at: options.at, ...(options.abort === undefined ? {} : { abort: options.abort }), values: { inherit: [generationConfig.budgetMs] } }, call);
    return { conversationId: child.id, conversation: await child.snapshot(call) };
  }

  async collapse(ref: ConversationRef, instructions: string | undefined): Promise<{ taskId: Id }> {
    const handle = await this.conversation(ref);
    return { taskId: await handle.collapse(instructions === undefined ? undefined : { instructions }, call) };
  }

  async reset(ref: ConversationRef, handoff: string | undefined): Promise<void> {
    const handle = await this.conversation(ref);
    await handle.reset(handoff === undefined ? undefined : { handoff }, call);
  }

  async config(id: Id): Promise<ConfigValues> {
    const storage = this.#harness.storage;
    const read = async <T>(spec: ValueSpec<T>): Promise<T | undefined> => (await storage.getValue(bindTo(spec, id)))?.value;
    const [model, thinking, selectedTools, profile, budgetMs] = await Promise.all([
      read(generationConfig.model),
      read(generationConfig.thinking),
      read(generationConfig.selectedTools),
      read(generationConfig.profile),
      read(generationConfig.budgetMs),
    ]);
    return {
      ...(model === undefined ? {} : { model }),
      ...(thinking === undefined ? {} : { thinking }),
      ...(selectedTools === undefined ? {} : { selectedTools }),
      ...(profile === undefined ? {} : { profile }),
      ...(budgetMs === undefined ? {} : { budgetMs }),
    };
  }

  async getConfig(ref: ConversationRef): Promise<ConfigValues> {
    const handle = await this.conversation(ref);
    return this.config(handle.id);
  }

  async patchConfig(ref: ConversationRef, patch: ConfigValues): Promise<ConfigValues> {
    const handle = await this.conversation(ref);
    checkConfig(this.#models, await selectableTools(this.#kit.tools.names(), this.#catalog, patch.selectedTools), patch);
    await handle.commit((tx) => {
      if (patch.model !== undefined) tx.value(generationConfig.model).set(patch.model);
      if (patch.thinking !== undefined) tx.value(generationConfig.thinking).set(patch.thinking);
      if (patch.selectedTools !== undefined) tx.value(generationConfig.selectedTools).set([...patch.selectedTools]);
      if (patch.profile !== undefined) tx.value(generationConfig.profile).set(patch.profile);
      if (patch.budgetMs !== undefined) tx.value(generationConfig.budgetMs).set(patch.budgetMs);
    }, call);
    return this.config(handle.id);
  }

  // tasks and usage ----------------------------------------------------------------------------------

  /** A page of tasks as clients see them: a settled tool task's output whole (`presentTask`, §9.3), stored compact. */
  async tasks(query: { live?: boolean; conversation?: ConversationRef; after?: Id; limit?: number }): Promise<Page<Task>> {
    const conversationIds = query.conversation === undefined ? undefined : [(await this.conversation(query.conversation)).id];
    const page = await this.#harness.storage.scanTasks({
      limit: query.limit ?? 100,
      ...(query.live === undefined ? {} : { live: query.live }),
      ...(conversationIds === undefined ? {} : { conversationIds }),
      ...(query.after === undefined ? {} : { after: query.after }),
    });
    return { ...page, items: page.items.map(presentTask) };
  }

  async task(id: Id): Promise<Task> {
    const task = await this.#harness.getTask(id, call);
    if (task === undefined) throw new Problem("task_not_found", `task ${id} does not exist`, "taskId");
    return presentTask(task);
  }

  async abortTask(id: Id): Promise<Task> {
    const task = await this.task(id);
    if (task.role !== "start" && task.role !== "inflight") throw new Problem("conflict", `task ${id} is already ${task.role}`);
    await this.#harness.abortTask(id, call);
    return this.task(id);
  }

  // schedules (§8.6) ------------------------------------------------------------------------------

  /** POST /schedules: a recurring background task that accepts `input` at every occurrence. */
  async createSchedule(request: ScheduleRequest): Promise<ScheduleView> {
    const handle = await this.conversation(request.conversation);
    // Every occurrence asks for a turn, and a turn needs a model (§9.5): refuse now, not at the first fire.
    // A conversation's model can be set but never unset over HTTP, so the check holds for its life.
    const model = (await this.#harness.storage.getValue(bindTo(generationConfig.model, handle.id)))?.value;
    if (model === undefined || model === "") {
      throw new Problem("invalid_body", `conversation ${handle.id} has no model configured (pi.model); set one with PATCH .../config before scheduling inputs into it`, "conversation");
    }
    const spec: ScheduleSpec = {
      conversationId: handle.id,
      input: request.input,
      mode: request.mode ?? "followUp",
      every: request.every ?? null,
      cron: request.cron ?? null,
      timezone: request.timezone ?? null,
      catchUp: request.catchUp ?? DEFAULT_CATCH_UP,
    };
    let state: ScheduleState;
    try {
      state = newSchedule(spec, this.#harness.now(), request.startAt ?? null);
    } catch (error) {
      if (error instanceof InvalidSchedule) throw new Problem("invalid_body", error.message, error.field);
      throw error;
    }
    const id = await this.#harness.commit((tx) => tx.task(scheduleDefinition, { conversationId: handle.id, background: true, state }), call);
    return this.schedule(id);
  }

  async schedules(query: { after?: Id; limit?: number; all?: boolean }): Promise<Page<ScheduleView>> {
    const page = await this.#harness.storage.scanTasks({
      kind: scheduleDefinition.kind,
      limit: query.limit ?? 100,
      ...(query.all === true ? {} : { live: true }),
      ...(query.after === undefined ? {} : { after: query.after }),
    });
    const items = await Promise.all(page.items.map((task) => this.#scheduleView(task)));
    return { ...page, items };
  }

  async schedule(id: Id): Promise<ScheduleView> {
    const task = await this.#harness.getTask(id, call);
    if (task === undefined || task.kind !== scheduleDefinition.kind) throw new Problem("schedule_not_found", `schedule ${id} does not exist`, "scheduleId");
    return this.#scheduleView(task);
  }

  /** DELETE /schedules/{id}: end it wherever it is (abort mark, then its abort handler). */
  async deleteSchedule(id: Id): Promise<ScheduleView> {
    const view = await this.schedule(id);
    if (view.status === "ended") return view;
    await this.#harness.abortTask(id, call);
    // The abort handler settles it in a moment; a mid-occurrence firing finishes unwinding first.
    await this.#harness.driver.waitForTask(id, { budgetMs: 5000 }, call);
    return this.schedule(id);
  }

  /**
   * PATCH /schedules/{id} { paused?, input?, mode?, catchUp?, every? | cron?, timezone? }. The host never
   * patches the schedule's task (§6.1): one commit stores the pause flag and the edit request (merged
   * with one not yet applied, validated against the schedule as it will be), then the schedule's sleep
   * is interrupted and the schedule applies both in its own commit. Answers once that commit is in (or
   * after SCHEDULE_APPLY_BUDGET_MS, with the view as it is then). A bad edit is a 400 naming the field
   * and writes nothing.
   */
  async patchSchedule(id: Id, patch: SchedulePatch): Promise<ScheduleView> {
    await this.schedule(id);
    const { paused, ...edit } = patch;
    const edits = Object.keys(edit).length > 0;
    await this.#harness.commit(async (tx) => {
      const task = (await this.#harness.storage.getTasks([id])).get(id);
      if (task === undefined || task.role === "terminal") throw new Problem("conflict", `schedule ${id} has ended`);
      if (edits) {
        const pending = await tx.value(scheduleEdit(id)).get();
        const merged = mergeEdit(pending, edit);
        const { status: _status, ...state } = task.state as ScheduleState;
        try {
          checkEdit(state, merged, this.#harness.now());
        } catch (error) {
          if (error instanceof InvalidSchedule) throw new Problem("invalid_body", error.message, error.field);
          throw error;
        }
        tx.value(scheduleEdit(id)).set(merged);
      }
      if (paused === true) tx.value(schedulePaused(id)).set(true);
      else if (paused === false) tx.value(schedulePaused(id)).delete();
    }, call);
    await this.#harness.driver.interruptSleep(id);
    await this.#scheduleApplied(id);
    return this.schedule(id);
  }

  /** Until the schedule has applied its pause flag and edit request (or ended), within the budget. */
  async #scheduleApplied(id: Id): Promise<void> {
    const storage = this.#harness.storage;
    const applied = async (): Promise<boolean> => {
      const task = (await storage.getTasks([id])).get(id);
      if (task === undefined || task.role === "terminal") return true;
      if ((await storage.getValue(bind(scheduleEdit(id), {}))) !== undefined) return false;
      const paused = (await storage.getValue(bind(schedulePaused(id), {})))?.value === true;
      return (task.state.status === "paused") === paused;
    };
    if (await applied()) return;
    const clock = this.#harness.driver.clock;
    const budget = new AbortController();
    await new Promise<void>((resolve) => {
      let stop: () => void = () => undefined;
      const finish = (): void => {
        stop();
        budget.abort();
        resolve();
      };
      const check = (): void => {
        applied().then(
          (done) => {
            if (done) finish();
          },
          () => finish(),
        );
      };
      stop = this.#harness.onCommit(check);
      clock.sleep(clock.now() + SCHEDULE_APPLY_BUDGET_MS, budget.signal).then(finish, () => undefined);
      check();
    });
  }

  async #scheduleView(task: Task): Promise<ScheduleView> {
    const state = task.state as ScheduleState | { status: "orphaned" };
    if (state.status === "orphaned") throw new Problem("conflict", `schedule ${task.id} is orphaned`);
    const paused = (await this.#harness.storage.getValue(bind(schedulePaused(task.id), {})))?.value === true;
    const { status, conversationId, input, mode, every, cron, timezone, catchUp, nextRunAt, lastRunAt, runs, skipped, skippedCapped, lastInputId } = state;
    return {
      id: task.id,
      conversationId,
      input,
      mode,
      every,
      cron,
      timezone,
      status: status === "ended" ? "ended" : paused ? "paused" : "active",
      // A paused schedule runs nothing until it is resumed.
      nextRunAt: status === "ended" || paused ? null : nextRunAt,
      lastRunAt,
      lastInputId,
      // Schedules stored before the policy existed catch up with one run.
      catchUp: catchUp ?? DEFAULT_CATCH_UP,
      runs,
      skipped,
      skippedCapped: skippedCapped === true,
    };
  }

  async usage(query: { after?: Id; limit?: number }): Promise<UsageReport> {
    const storage = this.#harness.storage;
    const root = this.#harness.rootId;
    const totals = (await storage.getValue(bindTo(usageTotals, root)))?.value;
    const page = await storage.readList(bindTo(usageList, root), { limit: query.limit ?? 100, ...(query.after === undefined ? {} : { after: query.after }) });
    const rows = { ...page, items: page.items.map((e): Element<UsageRow> => ({ ...e, value: readUsageRow(e.value) })) };
    return { totals, rows };
  }
}

export type { JsonValue };
