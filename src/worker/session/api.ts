/**
 * What the HTTP API does inside one session Durable Object: the operations behind the conversation,
 * config, task and usage routes, over an open Harness and its turn kit (SessionApi). The SessionObject's
 * op table (session/op-table.ts) calls these and returns their results (or problems) as `Outcome`s; the
 * Worker has already validated every input (src/worker/schemas.ts). The other operations are their own
 * modules over a SessionApi: inputs (session/input-ops.ts), schedules (session/schedule-ops.ts), pending
 * answers, inbound endpoints; the session's config values and checks are session/config.ts.
 *
 * Nothing here writes before it has resolved everything it names: a missing conversation, input or task
 * is a problem before any commit, so a bad request writes nothing.
 */
import type { Models } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import type { ConversationHandle } from "../../core/conversation.js";
import type { Harness } from "../../core/harness.js";
import { bindInbox, type QueuedInput } from "../../core/inbox.js";
import { bindTo, type ValueSpec } from "../../core/state.js";
import type { TxBuilder } from "../../core/tx.js";
import { childrenList } from "../../core/spawn.js";
import { generationConfig } from "../../kinds/config.js";
import { continueInbox } from "../../kinds/placement.js";
import { waitingInputs } from "../../kinds/waiting.js";
import type { UsageRow } from "../../kinds/states.js";
import type { TurnKit } from "../../kinds/turns.js";
import { readUsageRow, usageList, usageTotals } from "../../kinds/usage.js";
import { presentEntry, presentTask } from "../../kinds/stored.js";
import type { Conversation, Element, Entry, Id, JsonValue, Page, Task } from "../../storage/records.js";
import type {
  ConfigPatch,
  ConfigValues,
  ConversationSnapshot,
  SessionSummary,
  UsageReport,
} from "../../api/responses.js";
import { Problem } from "../problems.js";
import type { ToolCatalog } from "../../kinds/catalog-types.js";
import { selectableTools } from "./tool-catalog.js";
import { canonicalModel, checkConfig, createConfigValue, storedConfig } from "./config.js";
import { preparedProfile, profileVariables, type ProfileCache } from "./profiles.js";
import { MAX_VARIABLES } from "../../api/profiles.js";
import { withAbortReasons, type ShownTask } from "./abort-reasons.js";

export type {
  AcceptResponse,
  ConfigPatch,
  ConfigValues,
  ConversationSnapshot,
  SessionConfig,
  SessionSummary,
  UsageReport,
  WaitingElement,
} from "../../api/responses.js";

export type ConversationRef = "root" | Id;

const call: Call = BACKGROUND_CONTEXT;

export class SessionApi {
  readonly #harness: Harness;
  readonly #kit: TurnKit;
  readonly #models: Models;
  /** The tenant's tool catalog (session/tool-catalog.ts): a selection may name its tools. */
  readonly #catalog: ToolCatalog | undefined;
  /** The tenant's profiles this session names (session/profiles.ts). */
  readonly #profiles: ProfileCache | undefined;

  constructor(harness: Harness, kit: TurnKit, models: Models, catalog?: ToolCatalog, profiles?: ProfileCache) {
    this.#harness = harness;
    this.#kit = kit;
    this.#models = models;
    this.#catalog = catalog;
    this.#profiles = profiles;
  }

  /**
   * Before an accept: read the latest version of the conversation's profile, so the generation the accept
   * creates captures it (an edit is seen by the next input). Sessions without a profile read nothing.
   */
  async readProfile(conversationId: Id): Promise<void> {
    if (this.#profiles === undefined) return;
    const name = (await this.#harness.storage.getValue(bindTo(generationConfig.profile, conversationId)))?.value;
    if (name !== undefined) await this.#profiles.refresh(name, 0);
  }

  get harness(): Harness {
    return this.#harness;
  }

  /** The turn kit the session opened with (its turn options place accepted inputs). */
  get kit(): TurnKit {
    return this.#kit;
  }

  async summary(): Promise<SessionSummary> {
    const storage = this.#harness.storage;
    const stored = (await storage.getValue(bindTo(createConfigValue, this.#harness.rootId)))?.value;
    // A session created before model ids were stored canonically reports its bare alias in `provider/model` form.
    const config =
      stored === undefined ? undefined : storedConfig({ ...stored, model: canonicalModel(this.#models, stored.model) });
    const live = await storage.scanTasks({ live: true, limit: 1000 });
    return { config, rootConversationId: this.#harness.rootId, lastSeq: storage.lastSeq, liveTasks: live.items.length };
  }

  async conversation(ref: ConversationRef): Promise<ConversationHandle> {
    const id = ref === "root" ? this.#harness.rootId : ref;
    const handle = await this.#harness.conversation(id, call);
    if (handle === undefined)
      throw new Problem("conversation_not_found", `conversation ${id} does not exist`, "conversation");
    // A deleted conversation's cached handle must not answer.
    const record = (await this.#harness.storage.getConversations([id])).get(id);
    if (record === undefined) {
      this.#harness.release(id);
      throw new Problem("conversation_not_found", `conversation ${id} does not exist`, "conversation");
    }
    return handle;
  }

  // conversations --------------------------------------------------------------------------------

  async snapshot(ref: ConversationRef): Promise<ConversationSnapshot> {
    const handle = await this.conversation(ref);
    const storage = this.#harness.storage;
    const conversation = await handle.snapshot(call);
    const tasks = await storage.scanTasks({ conversationIds: [handle.id], live: true, limit: 1000 });
    const inbox = await storage.readList<QueuedInput>(bindInbox(handle.id), { limit: 1000 });
    const waiting = new Set((await storage.getValue(bindTo(waitingInputs, handle.id)))?.value ?? []);
    const ownerTask =
      conversation.owner === undefined
        ? undefined
        : (await storage.getTasks([conversation.owner])).get(conversation.owner);
    const children = await storage.readList<Id>(bindTo(childrenList, handle.id), { limit: 1000 });
    return {
      conversation,
      owner: ownerTask === undefined ? null : { taskId: ownerTask.id, conversationId: ownerTask.conversationId },
      children: children.items.map((element) => element.value),
      config: await this.config(handle.id),
      tasks: await withAbortReasons(storage, tasks.items.map(presentTask)),
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
        throw new Problem(
          "in_turn",
          `conversation ${conversationId} has a live turn; its queued inputs are placed at that turn's next boundary`,
        );
      }
      const placed = await continueInbox(b, conversationId, this.#kit.options, this.#harness.now());
      if (placed === undefined)
        throw new Problem(
          "nothing_waiting",
          `conversation ${conversationId} has no queued steer or followUp input to continue with`,
        );
      return placed;
    });
  }

  /** A transcript page as clients see it: tool result data whole (`presentEntry`, §9.3), stored compact. */
  async entries(
    ref: ConversationRef,
    query: { before?: Id; after?: Id; limit?: number; kind?: string },
  ): Promise<Page<Entry>> {
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
      throw new Problem(
        "conflict",
        "the root conversation is deleted with its session (DELETE /v1/sessions/{session})",
        "conversation",
      );
    }
    if (this.#harness.driver.subtreeBusy(handle.id)) {
      throw new Problem(
        "busy",
        `conversation ${handle.id} has running work in its subtree (it or a conversation it owns); abort it or wait until it settles`,
        "conversation",
      );
    }
    const deleted = await this.#harness.deleteConversation(handle.id, call);
    return { deleted };
  }

  /**
   * Fork (§2.4, §4.3). A fork at "start" sees no history, so its creating commit also sets the source's config as it
   * stood before the source's first entry (model, thinking, tools, profile): a template's config is set then, and a
   * fork at "start" of a template-made session has a model. Config committed later is never copied.
   * `also`: more writes for the creating commit (a chat's pointer, session/chat-ops.ts).
   */
  async fork(
    ref: ConversationRef,
    options: { at: Id | "start"; abort?: boolean },
    also?: (b: TxBuilder, child: Id) => void,
  ): Promise<{ conversationId: Id; conversation: Conversation }> {
    const handle = await this.conversation(ref);
    if (options.at !== "start") {
      const entry = await this.#harness.getEntry(options.at, call);
      if (entry === undefined) throw new Problem("entry_not_found", `entry ${options.at} does not exist`, "at");
    }
    const set = options.at === "start" ? await this.#configAtStart(handle.id) : [];
    const child = await handle.fork(
      {
        at: options.at,
        ...(options.abort === undefined ? {} : { abort: options.abort }),
        values: { inherit: [generationConfig.budgetMs], set },
        ...(also === undefined ? {} : { also }),
      },
      call,
    );
    return { conversationId: child.id, conversation: await child.snapshot(call) };
  }

  /** The rewindable config values of `id` as they stood before its first entry (all current ones when it has none). */
  async #configAtStart(id: Id): Promise<[ValueSpec<unknown>, JsonValue][]> {
    const storage = this.#harness.storage;
    const first = (await storage.scanEntries({ conversationId: id, limit: 1 })).items[0];
    const specs: ValueSpec<JsonValue>[] = [
      generationConfig.model,
      generationConfig.thinking,
      generationConfig.selectedTools,
      generationConfig.profile,
    ];
    const out: [ValueSpec<unknown>, JsonValue][] = [];
    for (const spec of specs) {
      const version =
        first === undefined
          ? await storage.getValue(bindTo(spec, id))
          : first.id <= 1
            ? undefined
            : await storage.getValue(bindTo(spec, id), first.id - 1);
      if (version?.value !== undefined) out.push([spec, version.value]);
    }
    return out;
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
    const read = async <T>(spec: ValueSpec<T>): Promise<T | undefined> =>
      (await storage.getValue(bindTo(spec, id)))?.value;
    const [model, thinking, selectedTools, profile, budgetMs] = await Promise.all([
      read(generationConfig.model),
      read(generationConfig.thinking),
      read(generationConfig.selectedTools),
      read(generationConfig.profile),
      read(generationConfig.budgetMs),
    ]);
    return {
      ...(model === undefined ? {} : { model: canonicalModel(this.#models, model) }),
      ...(thinking === undefined ? {} : { thinking }),
      ...(selectedTools === undefined ? {} : { selectedTools }),
      ...(profile === undefined ? {} : { profile }),
      ...(budgetMs === undefined ? {} : { budgetMs }),
    };
  }

  /** The config values and the profile version the instructions were last prepared from. */
  async getConfig(ref: ConversationRef): Promise<ConfigValues> {
    const handle = await this.conversation(ref);
    const [values, prepared] = await Promise.all([this.config(handle.id), preparedProfile(this.#harness, handle.id)]);
    return { ...values, ...(prepared === undefined ? {} : { preparedProfile: prepared }) };
  }

  /** `profile: null` clears the conversation's profile. */
  async patchConfig(ref: ConversationRef, patch: ConfigPatch): Promise<ConfigValues> {
    const handle = await this.conversation(ref);
    checkConfig(
      this.#models,
      await selectableTools(this.#kit.tools.names(), this.#catalog, patch.selectedTools),
      patch,
    );
    await handle.commit((tx) => {
      // A bare alias (`echo`) is stored as its `provider/model` id, so what is read back is canonical.
      if (patch.model !== undefined) tx.value(generationConfig.model).set(canonicalModel(this.#models, patch.model));
      if (patch.thinking !== undefined) tx.value(generationConfig.thinking).set(patch.thinking);
      if (patch.selectedTools !== undefined) tx.value(generationConfig.selectedTools).set([...patch.selectedTools]);
      if (patch.profile === null) tx.value(generationConfig.profile).delete();
      else if (patch.profile !== undefined) tx.value(generationConfig.profile).set(patch.profile);
      if (patch.budgetMs !== undefined) tx.value(generationConfig.budgetMs).set(patch.budgetMs);
    }, call);
    return this.config(handle.id);
  }

  /**
   * Set or remove (null) variables in one commit on the root (a session value: sticky, every conversation
   * sees it); the next generation renders them (session/profiles.ts).
   */
  async setVariables(patch: Readonly<Record<string, string | null>>): Promise<{ variables: Record<string, string> }> {
    const root = await this.conversation("root");
    let variables: Record<string, string> = {};
    await root.commit(async (tx) => {
      variables = { ...((await tx.value(profileVariables).get()) ?? {}) };
      for (const [name, value] of Object.entries(patch)) {
        if (value === null) delete variables[name];
        else variables[name] = value;
      }
      if (Object.keys(variables).length > MAX_VARIABLES)
        throw new Problem("invalid_body", `variables: at most ${MAX_VARIABLES} variables`, "variables");
      tx.value(profileVariables).set(variables);
    }, call);
    return { variables };
  }

  // tasks and usage ----------------------------------------------------------------------------------

  /**
   * A page of tasks as clients see them: a settled tool task's output whole (`presentTask`, §9.3), stored compact,
   * and the host's reason for an abort mark (`abortReason`, session/abort-reasons.ts).
   */
  async tasks(query: {
    live?: boolean;
    conversation?: ConversationRef;
    after?: Id;
    limit?: number;
  }): Promise<Page<ShownTask>> {
    const conversationIds =
      query.conversation === undefined ? undefined : [(await this.conversation(query.conversation)).id];
    const page = await this.#harness.storage.scanTasks({
      limit: query.limit ?? 100,
      ...(query.live === undefined ? {} : { live: query.live }),
      ...(conversationIds === undefined ? {} : { conversationIds }),
      ...(query.after === undefined ? {} : { after: query.after }),
    });
    return { ...page, items: await withAbortReasons(this.#harness.storage, page.items.map(presentTask)) };
  }

  async task(id: Id): Promise<ShownTask> {
    const task = await this.#harness.getTask(id, call);
    if (task === undefined) throw new Problem("task_not_found", `task ${id} does not exist`, "taskId");
    const [shown] = await withAbortReasons(this.#harness.storage, [presentTask(task)]);
    return shown ?? presentTask(task);
  }

  async abortTask(id: Id): Promise<ShownTask> {
    const task = await this.task(id);
    if (task.role !== "start" && task.role !== "inflight")
      throw new Problem("conflict", `task ${id} is already ${task.role}`);
    await this.#harness.abortTask(id, call);
    return this.task(id);
  }

  async usage(query: { after?: Id; limit?: number }): Promise<UsageReport> {
    const storage = this.#harness.storage;
    const root = this.#harness.rootId;
    const totals = (await storage.getValue(bindTo(usageTotals, root)))?.value;
    const page = await storage.readList(bindTo(usageList, root), {
      limit: query.limit ?? 100,
      ...(query.after === undefined ? {} : { after: query.after }),
    });
    const rows = { ...page, items: page.items.map((e): Element<UsageRow> => ({ ...e, value: readUsageRow(e.value) })) };
    return { totals, rows };
  }
}

export type { JsonValue };
