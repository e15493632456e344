/**
 * Accepting input and placing it at turn boundaries (§8.1). The placement table:
 *
 *   mode      placement                            effect on the answer group
 *   write     next post_tools or final boundary    none; its result is done with no answer
 *   steer     next post_tools or final boundary    joins the active group at post_tools; starts the next group after a
 *   final answer
 *   followUp  final-answer boundary                starts the next group
 *   nextRun   next explicit idle accept            joins the group started by that acceptance
 *
 * An input that offers page tools (run-tools.ts) is queued as a followUp whatever it asks, and placed as a group of its
 * own: the group being formed stops at it, and items queued after it wait for its answer.
 *
 * Placement appends the entry, removes the list element and writes its result in one commit. Only the
 * generation and post_tools transition a group; exactly one live generation or post_tools owns it.
 */
import type { UserInput } from "../core/entries.js";
import { PicoError } from "../core/errors.js";
import {
  abortQueuedInput,
  bindResult,
  placeInput,
  priorAcceptance,
  queuedItems,
  queueInput,
  userDraft,
  type InputResult,
  type QueuedInput,
} from "../core/inbox.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id, JsonValue } from "../storage/records.js";
import { captureConfig, freshRetry } from "./config.js";
import type { FinalAnswerExtension, TurnOptions } from "./services.js";
import type { OfferedTool } from "./catalog-types.js";
import { queuedRunTools, queueRunTools, takeRunTools, withRunTools } from "./run-tools.js";
import type { CapturedConfig, GenerationState, RetryBudget } from "./states.js";
import { clearWaiting, markWaiting } from "./waiting.js";
import { consumeSubagentNotice } from "./subagent-notice.js";

export type WhenBusy = "followUp" | "steer" | "reject";

export interface AcceptOptions {
  readonly input: UserInput;
  /** The user entry's `data` (never model input): an inbound delivery's payload and source. */
  readonly data?: JsonValue;
  readonly requestId?: string;
  /** The id the sender shows the message under (a chat message's id): the user entry's key. */
  readonly messageId?: string;
  readonly whenBusy?: WhenBusy;
  /**
   * Client tools the page offers for this input's turn only (run-tools.ts). They belong to a turn this input
   * starts: while the conversation is busy it is queued as a followUp with them, and placed as a group of its own.
   */
  readonly runTools?: readonly OfferedTool[];
}

export interface AcceptReceipt {
  readonly inputId: Id;
  /**
   * "placed": a generation was created for it now; "queued": it waits for a boundary; "duplicate": the request key was
   * used before.
   */
  readonly status: "placed" | "queued" | "duplicate";
  readonly generation?: Id;
}

/** Create a pending generation owning `inputs` (the group). */
export function createGeneration(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  config: CapturedConfig,
  retry: RetryBudget,
): Id {
  const state: GenerationState = { status: "pending", inputs: [...inputs], config, retry };
  return b.task({ kind: "generation" }, conversationId, { state });
}

/**
 * accept (§8.1, "the user hit enter"): idle -> place the entry (with queued nextRun items joining its
 * group) and create a generation in one commit; busy -> queue as followUp (default) or steer, or reject.
 * A request key names one acceptance for the life of the session (§3.4).
 */
export async function acceptInput(
  b: TxBuilder,
  conversationId: Id,
  options: AcceptOptions,
  turn: TurnOptions,
  now: number,
): Promise<AcceptReceipt> {
  const prior = await priorAcceptance(b, options.requestId);
  if (prior !== undefined) return { inputId: prior.inputId, status: "duplicate" };
  if (b.inTurn(conversationId)) {
    const tools = options.runTools !== undefined && options.runTools.length > 0 ? options.runTools : undefined;
    // An input with page tools never steers the live turn: its tools are its own turn's (run-tools.ts).
    const whenBusy =
      tools !== undefined && options.whenBusy !== "reject" ? "followUp" : (options.whenBusy ?? "followUp");
    if (whenBusy === "reject") {
      throw new PicoError(
        "conflict",
        `conversation ${conversationId} is busy with a turn and the input asked not to wait (whenBusy: reject)`,
      );
    }
    const item: QueuedInput = withMessage(
      withRequest(
        { mode: whenBusy, input: options.input, ...(options.data === undefined ? {} : { data: options.data }) },
        options.requestId,
      ),
      options.messageId,
    );
    const inputId = queueInput(b, conversationId, item);
    if (tools !== undefined) queueRunTools(b, conversationId, inputId, tools);
    return { inputId, status: "queued" };
  }
  const config = withRunTools(await captureConfig(b, conversationId, turn), options.runTools);
  // Queued items that land at an explicit idle accept: nextRun joins the new group; writes are placed.
  // A steer or followUp still queued while the conversation is idle missed its boundary (it was queued
  // while only a background turn task ran, or its group failed, which does not consume it): it joins
  // this group in admission order rather than waiting for a boundary that will not come.
  const queued = await queuedItems(b, conversationId);
  const group: Id[] = [];
  for (const item of queued) {
    // One that offers page tools stays queued: it is a group of its own, after this one (run-tools.ts).
    if (item.value.mode !== "write" && (await queuedRunTools(b, conversationId, item.id)) !== undefined) continue;
    if (item.value.mode === "nextRun" || item.value.mode === "steer" || item.value.mode === "followUp") {
      placeInput(b, conversationId, item.id, item.value, userDraft(item.value.input, now, item.value.data));
      group.push(item.id);
    } else if (item.value.mode === "write") {
      placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    }
  }
  if (group.length > 0) await clearWaiting(b, conversationId);
  const item: QueuedInput = withMessage(
    withRequest(
      {
        mode: "followUp" as const,
        input: options.input,
        ...(options.data === undefined ? {} : { data: options.data }),
      },
      options.requestId,
    ),
    options.messageId,
  );
  const inputId = queueInput(b, conversationId, item);
  placeInput(b, conversationId, inputId, item, userDraft(options.input, now, options.data));
  group.push(inputId);
  const generation = createGeneration(b, conversationId, group, config, freshRetry(turn));
  return { inputId, status: "placed", generation };
}

/**
 * Is a foreground turn task live in the conversation? The §5.8 inTurn set, minus background turn tasks
 * (a manual collapse): only a foreground turn has an exchange in progress that a head could cut.
 */
export async function foregroundTurn(b: TxBuilder, conversationId: Id): Promise<boolean> {
  if (!b.inTurn(conversationId)) return false;
  let after: Id | undefined;
  for (;;) {
    const page = await b.scanTasks({
      conversationIds: [conversationId],
      live: true,
      limit: 100,
      ...(after === undefined ? {} : { after }),
    });
    if (page.items.some((t) => t.turn === true && t.background !== true)) return true;
    if (page.next === undefined) return false;
    after = page.next;
  }
}

/**
 * The post_tools boundary (§5.5): place queued writes, place queued steering in admission order and
 * extend the group with them. Returns the extended group.
 */
export async function landPostToolsInbox(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  now: number,
): Promise<Id[]> {
  const group = [...inputs];
  for (const item of await queuedItems(b, conversationId)) {
    if (item.value.mode === "write") {
      placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    } else if (item.value.mode === "steer") {
      placeInput(b, conversationId, item.id, item.value, userDraft(item.value.input, now, item.value.data));
      group.push(item.id);
    }
  }
  return group;
}

/**
 * The final-answer boundary: resolve every input of the group to the answer, consult the kit's
 * final-answer extension (it may accept inputs first, services.ts FinalAnswerBoundary), place writes,
 * then place steer and followUp items into a new group, unless the extension accepted an input first:
 * then that input is the new group and the queued items wait for its answer. Returns the new group
 * (empty: no successor needed).
 */
export async function landFinalInbox(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  answer: Id,
  now: number,
  extension?: FinalAnswerExtension,
): Promise<Id[]> {
  await resolveGroup(b, conversationId, inputs, (placed) => ({
    status: "done",
    entry: placed.entry,
    answer,
    ...req(placed),
  }));
  const next: Id[] = [];
  if (extension !== undefined) {
    await extension({
      builder: b,
      conversationId,
      inputs,
      answer,
      now,
      async acceptFirst(input, requestId) {
        const prior = await priorAcceptance(b, requestId);
        if (prior !== undefined) return prior.inputId;
        const item: QueuedInput = { mode: "followUp", input, requestId };
        const inputId = queueInput(b, conversationId, item);
        placeInput(b, conversationId, inputId, item, userDraft(input, now));
        next.push(inputId);
        return inputId;
      },
    });
  }
  // An input accepted first is a group of its own: queued steer/followUp items stay queued for its final
  // answer, the next boundary (they go after it, not into it). Reads see committed state only, so an
  // input accepted first above is not among the queued items.
  let ahead = next.length > 0;
  for (const item of await queuedItems(b, conversationId)) {
    if (item.value.mode === "write") {
      placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    } else if (!ahead && (item.value.mode === "steer" || item.value.mode === "followUp")) {
      ahead = await ownGroup(b, conversationId, item.id);
      if (ahead && next.length > 0) continue;
      placeInput(b, conversationId, item.id, item.value, userDraft(item.value.input, now, item.value.data));
      next.push(item.id);
    }
  }
  return next;
}

/**
 * Failure, terminate or abort of a group: resolve its inputs unanswered. Safe writes may be placed
 * (`placeWrites`), but queued inputs that need a successor are not consumed (§8.1).
 */
export async function resolveUnanswered(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  reason: "terminated" | "aborted" | "failed",
  options: { detail?: string; placeWrites?: boolean } = {},
): Promise<void> {
  await resolveGroup(b, conversationId, inputs, (placed) => ({
    status: "unanswered",
    entry: placed.entry,
    reason,
    ...(options.detail === undefined ? {} : { detail: options.detail }),
    ...req(placed),
  }));
  if (options.placeWrites) {
    for (const item of await queuedItems(b, conversationId)) {
      if (item.value.mode === "write")
        placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    }
  }
  // Without a final answer nothing places queued steer/followUp (§8.1, §6.4): say that they wait. An
  // abort withdrew them already (§6.3).
  if (reason !== "aborted") await markWaiting(b, conversationId);
}

/**
 * POST .../continue (docs/api.md "Waiting input"): the explicit user action that places the waiting steer/followUp
 * items
 * (with queued writes and nextRun items, as an idle accept would) into a new group and creates its
 * generation, in one commit. Returns the group and the generation, or undefined when nothing is queued.
 * The caller checks that no turn is live (a live turn places them at its own boundary).
 */
export async function continueInbox(
  b: TxBuilder,
  conversationId: Id,
  turn: TurnOptions,
  now: number,
): Promise<{ inputs: Id[]; generation: Id } | undefined> {
  const group: Id[] = [];
  const queued = await queuedItems(b, conversationId);
  if (!queued.some((item) => item.value.mode === "steer" || item.value.mode === "followUp")) return undefined;
  const captured = await captureConfig(b, conversationId, turn);
  let ahead = false;
  for (const item of queued) {
    if (item.value.mode === "write") {
      placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    } else if (!ahead) {
      ahead = await ownGroup(b, conversationId, item.id);
      if (ahead && group.length > 0) continue;
      placeInput(b, conversationId, item.id, item.value, userDraft(item.value.input, now, item.value.data));
      group.push(item.id);
    }
  }
  await clearWaiting(b, conversationId);
  const config = withRunTools(captured, await takeRunTools(b, conversationId, group));
  return { inputs: group, generation: createGeneration(b, conversationId, group, config, freshRetry(turn)) };
}

/**
 * A turn boundary that leaves the conversation idle without an answer (a manual collapse settling):
 * place queued writes, and steer/followUp items into a new group, so input accepted while the collapse
 * held the conversation (§5.8) is not stranded until the next explicit accept. Returns the new group.
 */
export async function landIdleInbox(b: TxBuilder, conversationId: Id, now: number): Promise<Id[]> {
  await clearWaiting(b, conversationId);
  const next: Id[] = [];
  let ahead = false;
  for (const item of await queuedItems(b, conversationId)) {
    if (item.value.mode === "write") {
      placeInput(b, conversationId, item.id, item.value, { ...item.value.entry, kind: item.value.kind });
    } else if (!ahead && (item.value.mode === "steer" || item.value.mode === "followUp")) {
      ahead = await ownGroup(b, conversationId, item.id);
      if (ahead && next.length > 0) continue;
      placeInput(b, conversationId, item.id, item.value, userDraft(item.value.input, now, item.value.data));
      next.push(item.id);
    }
  }
  return next;
}

/**
 * Whether queued input `inputId` offers page tools (run-tools.ts): it is a group of its own, so a group being formed
 * stops at it (it waits for the next boundary when the group has inputs, else it is the group, alone).
 */
async function ownGroup(b: TxBuilder, conversationId: Id, inputId: Id): Promise<boolean> {
  return (await queuedRunTools(b, conversationId, inputId)) !== undefined;
}

/** Withdraw queued steer/followUp (foreground abort keeps write and nextRun, §6.3). */
export async function withdrawTurnInputs(b: TxBuilder, conversationId: Id): Promise<void> {
  for (const item of await queuedItems(b, conversationId)) {
    if (item.value.mode === "steer" || item.value.mode === "followUp")
      await abortQueuedInput(b, conversationId, item.id);
  }
}

async function resolveGroup(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  next: (placed: Extract<InputResult, { status: "placed" }>) => Extract<InputResult, { status: "done" | "unanswered" }>,
): Promise<void> {
  for (const inputId of inputs) {
    const result = await b.value(bindResult(conversationId, inputId)).get();
    if (result?.status !== "placed") {
      throw new PicoError(
        "contract",
        `input ${inputId} of conversation ${conversationId} is ${result?.status ?? "missing"}, not placed; a group's inputs resolve once`,
      );
    }
    const resolved = next(result);
    b.value(bindResult(conversationId, inputId)).set(resolved);
    // A delegated subagent call waiting for this input hears of it in this commit (§8.3, §8.6).
    await consumeSubagentNotice(b, conversationId, inputId, resolved);
  }
}

function req(result: InputResult): { requestId?: string } {
  return result.requestId === undefined ? {} : { requestId: result.requestId };
}

function withMessage<T extends object>(value: T, messageId: string | undefined): T & { messageId?: string } {
  return messageId === undefined ? value : { ...value, messageId };
}

function withRequest<T extends object>(value: T, requestId: string | undefined): T & { requestId?: string } {
  return requestId === undefined ? value : { ...value, requestId };
}
