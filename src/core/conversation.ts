/**
 * ConversationHandle (§9.1): one conversation's view of the harness. It binds conversation specs to its
 * id, owns the process-local context cache (§2.2) and creates forks (§2.4). Execution-related methods
 * (accept, drive, abort) are added by the driver and turn layers.
 */
import type { Conversation, Entry, Id, JsonValue } from "../storage/records.js";
import type { EntryDraft, EntryInput, EntryKind, UserInput } from "./entries.js";
import {
  abortQueuedInput,
  bindResult,
  priorAcceptance,
  queueInput,
  queuedItems,
  writeEntry,
  type InputResult,
  type QueuedInput,
} from "./inbox.js";
import type { Call } from "./call.js";
import { ContextCache, type DerivedContext } from "./context.js";
import { invalid, PicoError } from "./errors.js";
import type { Harness } from "./harness.js";
import type { ListHandle, ValueHandle } from "./handles.js";
import { listHandle, valueHandle } from "./harness.js";
import { bind, type ListRef, type ValueRef, type ValueSpec } from "./state.js";
import type { ConfigSpec, ConfigValues, HookPoints, HookSpecs } from "./task-kind-types.js";
import type { HookHandler, HookRegistry } from "./hooks.js";
import { conversationTx, type ConversationTx, type TxBuilder } from "./tx.js";
import { visibleEntry } from "./validate.js";
import { spawnChild, type ChildValues, type FirstTurn, type SpawnOptions, type Spawned } from "./spawn.js";

export interface ConfigHandle<C extends ConfigSpec> {
  get(call: Call): Promise<ConfigValues<C>>;
  set(partial: Partial<{ -readonly [K in keyof C]: NonNullable<ConfigValues<C>[K]> }>, call: Call): Promise<void>;
}

/** Accept options (§8.1, §9.1). */
export interface AcceptOptions {
  readonly input: UserInput;
  readonly requestId?: string;
  readonly whenBusy?: "followUp" | "steer" | "reject";
}

export interface AcceptReceipt {
  readonly inputId: Id;
  /**
   * "placed": a generation started for it now; "queued": it waits for a boundary; "duplicate": the request key was used
   * before.
   */
  readonly status: "placed" | "queued" | "duplicate";
}

/** What the kinds layer installs on a harness (`harness.turns`) so handles can run turns. */
export interface TurnApi extends FirstTurn {
  /** The hook registry the turn kinds run (§8.7). */
  readonly hooks: HookRegistry;
  /** The generation kind in use, for `settings` (its declared config). */
  readonly generation: { readonly kind: string; readonly config?: ConfigSpec };
  accept(conversationId: Id, options: AcceptOptions, call: Call): Promise<AcceptReceipt>;
  prompt(conversationId: Id, options: AcceptOptions, call: Call): Promise<Entry | undefined>;
  collapse(conversationId: Id, options: { instructions?: string } | undefined, call: Call): Promise<Id>;
  reset(conversationId: Id, options: { handoff?: string } | undefined, call: Call): Promise<void>;
}

export type { ChildValues, SpawnOptions, Spawned } from "./spawn.js";

export interface ForkOptions {
  /** Mark the source's foreground set in the same commit ("go back to that point"). */
  readonly abort?: boolean;
  /** An entry visible in this conversation, or "start" for an empty prefix. */
  readonly at: Id | "start";
  /** Sticky conversation values to copy from this conversation's current state (§4.3). */
  readonly values?: {
    readonly inherit?: readonly ValueSpec<unknown>[];
    /** Conversation values the fork starts with, written in its creating commit (a fork at "start"'s config, §4.3). */
    readonly set?: readonly (readonly [ValueSpec<unknown>, JsonValue])[];
  };
  /** More writes for the creating commit, given the fork's id (a host's pointer to the new branch). */
  readonly also?: (b: TxBuilder, child: Id) => void;
}

export class ConversationHandle {
  readonly id: Id;
  readonly harness: Harness;
  readonly record: Conversation;
  #cache: ContextCache | undefined;

  constructor(harness: Harness, record: Conversation) {
    this.harness = harness;
    this.id = record.id;
    this.record = record;
  }

  async snapshot(_call: Call): Promise<Conversation> {
    const record = (await this.harness.storage.getConversations([this.id])).get(this.id);
    if (record === undefined) throw new PicoError("not_found", `conversation ${this.id} does not exist`);
    return record;
  }

  /** Commit with this conversation bound (§9.2). */
  commit<T>(plan: (tx: ConversationTx) => T | Promise<T>, call: Call): Promise<T> {
    return this.harness.commitBound(call, { conversationId: this.id }, (b) => plan(conversationTx(b, this.id)));
  }

  /**
   * Queue an input in a given mode (§8.1). A request key already used returns its first inputId and writes nothing
   * (§3.4).
   */
  async queueInput(input: QueuedInput, call: Call): Promise<{ inputId: Id }> {
    return this.harness.commitBound(call, { conversationId: this.id }, async (b) => {
      const prior = await priorAcceptance(b, input.requestId);
      if (prior !== undefined) return { inputId: prior.inputId };
      return { inputId: queueInput(b, this.id, input) };
    });
  }

  /** tx.write wrapped in a commit (§5.8): append now when idle, else queue for the next boundary. */
  async write<E extends Entry>(
    kind: EntryKind<E>,
    input: EntryInput<E>,
    call: Call,
    requestId?: string,
  ): Promise<{ inputId: Id }> {
    return this.harness.commitBound(call, { conversationId: this.id }, async (b) => {
      const prior = await priorAcceptance(b, requestId);
      if (prior !== undefined) return { inputId: prior.inputId };
      return { inputId: writeEntry(b, this.id, kind.kind, input as EntryDraft, b.inTurn(this.id), requestId) };
    });
  }

  /** Withdraw a queued input (§8.1). */
  abortInput(inputId: Id, call: Call): Promise<"aborted" | "not_found"> {
    return this.harness.commitBound(call, { conversationId: this.id }, (b) => abortQueuedInput(b, this.id, inputId));
  }

  /** What became of an input: one sticky-value point read (§9.1). */
  async result(inputId: Id, _call: Call): Promise<InputResult | undefined> {
    return (await this.harness.storage.getValue(bindResult(this.id, inputId)))?.value;
  }

  /**
   * Abort (§6.3): one commit marks the foreground ownership closure and withdraws queued steer and
   * followUp in every conversation of that closure: this one and the owned conversations its live
   * foreground tasks reach (a `run` subagent, §8.5, and further down); write and nextRun stay queued.
   * Only this public operation withdraws a child's queue: a tool's own abort handler and shutdown's
   * cleanup mark the child's tasks only (§6.3 task-only cleanup, §10.2).
   */
  async abort(call: Call): Promise<void> {
    await this.harness.commitMarks(async (b) => {
      const closure = this.harness.driver.foregroundClosure(this.id);
      this.harness.driver.markWrites(b, closure.tasks, { ifLive: true });
      for (const conversationId of closure.conversations) {
        for (const item of await queuedItems(b, conversationId)) {
          if (item.value.mode === "steer" || item.value.mode === "followUp") {
            await abortQueuedInput(b, conversationId, item.id);
          }
        }
      }
    }, call);
  }

  /** Attach this conversation and wait until it has no live foreground task (§6.2). */
  drive(call: Call): Promise<"idle" | "closed"> {
    return this.harness.driver.drive(this.id, call);
  }

  /** drive with a blocking budget (§8.3): "budget" when `budgetMs` passes first; the work goes on. */
  driveWithin(budgetMs: number, call: Call): Promise<"idle" | "closed" | "budget"> {
    return this.harness.driver.driveWithin(this.id, budgetMs, call);
  }

  value<T>(addr: ValueRef<T>): ValueHandle<T> {
    return valueHandle(this.harness, addr, { conversationId: this.id });
  }

  list<T>(addr: ListRef<T>): ListHandle<T> {
    return listHandle(this.harness, addr, { conversationId: this.id });
  }

  /** The values a kind declares, read together and set in one commit (§5.2). */
  config<C extends ConfigSpec>(kind: { readonly kind: string; readonly config?: C }): ConfigHandle<C> {
    const spec = (kind.config ?? {}) as C;
    const storage = this.harness.storage;
    return {
      get: async () => {
        const keys = Object.keys(spec);
        const values = await Promise.all(
          keys.map(
            async (key) =>
              (await storage.getValue(bind(spec[key] as ValueSpec<unknown>, { conversationId: this.id })))?.value,
          ),
        );
        return Object.fromEntries(keys.map((key, i) => [key, values[i]])) as ConfigValues<C>;
      },
      set: async (partial, call) => {
        await this.commit((tx) => {
          for (const [key, value] of Object.entries(partial)) {
            const addr = spec[key];
            if (addr === undefined) throw new PicoError("not_found", `${kind.kind} declares no config ${key}`);
            if (value !== undefined) tx.value(addr).set(value as JsonValue);
          }
        }, call);
      },
    };
  }

  /** The derived context through `through` (default: now), from this handle's cache (§2.2). */
  contextEntries(through: Id | undefined, _call: Call): Promise<DerivedContext> {
    this.#cache ??= new ContextCache(this.harness.storage, this.id);
    return this.#cache.contextEntries(through);
  }

  /** Called by the commit line after each durable batch with this conversation's new entries. */
  observe(entries: readonly Entry[], last: Id): void {
    this.#cache?.observe(entries, last);
  }

  /**
   * A new conversation whose transcript and rewindable state are this one's through `at` (§2.4, §4.3);
   * sticky values only when selected.
   */
  async fork(options: ForkOptions, call: Call): Promise<ConversationHandle> {
    const plan = async (b: TxBuilder): Promise<Id> => {
      const at = options.at === "start" ? 0 : options.at;
      if (options.at !== "start") {
        // A fork-aware point read: the chain may run through a deleted source (§2.4, §6.4).
        if (!Number.isSafeInteger(at) || at < 1 || !(await visibleEntry(this.harness.storage, this.id, at))) {
          throw new PicoError("invalid_commit", `cannot fork conversation ${this.id} at ${at}: not one of its entries`);
        }
      }
      const copies: [ValueSpec<unknown>, JsonValue][] = [];
      for (const spec of options.values?.inherit ?? []) {
        // Rewindable history is inherited as of `at` already; copying its current value would leak state
        // committed after the fork point into the fork (§3.2, §4.3). Session state is shared anyway.
        if (spec.scopeKind !== "conversation" || spec.rewind) {
          throw invalid(
            `a fork copies only sticky conversation values; ${spec.namespace} is ${spec.rewind ? "rewindable" : `${spec.scopeKind} state`}`,
          );
        }
        const value = await b.value(bind(spec, { conversationId: this.id })).get();
        if (value !== undefined) copies.push([spec, value as JsonValue]);
      }
      const child = b.createConversation({ parent: { conversationId: this.id, at } });
      for (const [spec, value] of copies) b.value(bind(spec, { conversationId: child })).set(value);
      for (const [spec, value] of options.values?.set ?? []) {
        if (spec.scopeKind !== "conversation")
          throw invalid(`a fork sets only conversation values; ${spec.namespace} is not`);
        b.value(bind(spec, { conversationId: child })).set(value);
      }
      options.also?.(b, child);
      if (options.abort === true) {
        // "Go back to that point": the source's foreground set is marked in the creating commit (§9.1).
        this.harness.driver.markWrites(b, this.harness.driver.foregroundClosure(this.id).tasks, { ifLive: true });
      }
      return child;
    };
    const id =
      options.abort === true
        ? await this.harness.commitMarks(plan, call)
        : await this.harness.commitBound(call, { conversationId: this.id }, plan);
    const handle = await this.harness.conversation(id, call);
    if (handle === undefined) throw new PicoError("not_found", `fork ${id} vanished`);
    return handle;
  }

  /**
   * Spawn a child conversation (§4.3, §9.1): one commit creates it owned by the task of `call` (a call
   * that carries no task is refused), copies the selected current values of this conversation, applies
   * overrides, appends the prompt and creates the first generation. Resolves with the child's id.
   *
   * @example
   * const child = await (await runtime.conversation(runtime.conversationId, call))!.spawn(
   *   { prompt: "summarize the logs", values: { inherit: [generationConfig.model], set:
   *   [[generationConfig.selectedTools, ["read"]]] } },
   *   call,
   * );
   */
  async spawn(options: SpawnOptions, call: Call): Promise<Id> {
    return (await this.harness.commitBound(call, { conversationId: this.id }, (b) => this.spawnIn(b, options)))
      .conversationId;
  }

  /**
   * spawn inside a builder whose call carries the owning task, so a task can record the child (and
   * its prompt's inputId) on its own state in the same commit.
   */
  async spawnIn(b: TxBuilder, options: SpawnOptions): Promise<Spawned> {
    const origin = b.origin;
    if (origin === undefined) {
      throw new PicoError(
        "contract",
        "spawn needs a call that carries a task: the child is owned by the task of the Call (§5.7); a host creates conversations with fork",
      );
    }
    const owner = this.harness.driver.liveTask(origin.taskId);
    if (owner === undefined)
      throw new PicoError(
        "contract",
        `task ${origin.taskId} is not live; only a live task can own a new conversation (§5.7)`,
      );
    const at = options.context?.at;
    if (
      at !== undefined &&
      at !== 0 &&
      !(Number.isSafeInteger(at) && at > 0 && (await visibleEntry(this.harness.storage, this.id, at)))
    ) {
      throw invalid(`cannot start a child of conversation ${this.id} from entry ${String(at)}: not one of its entries`);
    }
    return spawnChild(b, this.id, owner, this.#firstTurn(), this.harness.now(), options);
  }

  // The turn (accept, prompt, collapse, reset) is built by the kinds layer and installed on the harness.

  /** "The user hit enter" (§8.1): place and start a generation when idle, else queue (followUp by default). */
  accept(options: AcceptOptions, call: Call): Promise<AcceptReceipt> {
    return this.#turns().accept(this.id, options, call);
  }

  /** accept, drive, then the answer entry when the input's result is done with an answer (§9.1). */
  prompt(options: AcceptOptions, call: Call): Promise<Entry | undefined> {
    return this.#turns().prompt(this.id, options, call);
  }

  /** A manual (background) collapse; resolves with the collapse task id (§8.4). */
  collapse(options: { instructions?: string } | undefined, call: Call): Promise<Id> {
    return this.#turns().collapse(this.id, options, call);
  }

  /** A reset head, or a handoff head with its message (§2.3); queued as a write while a turn is live. */
  reset(options: { handoff?: string } | undefined, call: Call): Promise<void> {
    return this.#turns().reset(this.id, options, call);
  }

  /** Hooks scoped to this conversation (and, with `subtree`, what it owns), run after harness-wide ones (§8.7). */
  get hooks(): {
    on: <H extends HookPoints, P extends keyof H & string>(
      kind: { readonly kind: string; readonly hooks?: HookSpecs<H> },
      point: P,
      handler: HookHandler<H[P]["input"], H[P]["output"]>,
      options?: { subtree?: boolean },
    ) => () => void;
  } {
    return {
      on: (kind, point, handler, options) =>
        this.#turns().hooks.on(kind, point, handler, { conversationId: this.id, subtree: options?.subtree === true }),
    };
  }

  /** Sugar for config(the generation kind in use): model, thinking, selected tools, profile, budget. */
  get settings(): ConfigHandle<ConfigSpec> {
    return this.config(this.#turns().generation);
  }

  #firstTurn(): FirstTurn {
    const turns = this.harness.turns;
    if (turns === undefined)
      throw new PicoError(
        "not_found",
        "this harness has no turn kinds installed; spawn needs them for the child's first generation",
      );
    return turns;
  }

  #turns(): TurnApi {
    const turns = this.harness.turns;
    if (turns === undefined)
      throw new PicoError("not_found", "this harness has no turn kinds installed (accept, prompt, collapse, reset)");
    return turns;
  }
}
