/**
 * The Rig's GUPP commits (seed 000 "GUPP Integration"; docs/rig.md): what a conversation agent's hook
 * does inside a commit. A pending hook whose conversation is idle activates and its work item becomes the
 * conversation's input ("the user hit enter"); the final answer of that input completes the hook, once;
 * the conversation's activity touches it (throttled). Each is one commit on the line, or part of the
 * settlement commit that records the answer (`settleAtFinalAnswer`). The `Rig` runs these (rig.ts);
 * gupp.ts is the host side that keeps them coming.
 */
import { BACKGROUND_CONTEXT, type Call } from "../core/call.js";
import type { Harness } from "../core/harness.js";
import { inputResult } from "../core/inbox.js";
import { bind } from "../core/state.js";
import { sessionTx, type Tx, type TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { iso, nextFile, touchWindow } from "./hooks.js";
import { agentValue, conversationAgent, hookValue, releaseBead, rigPaused, setValue, settingsTx } from "./state.js";
import type { AgentRecord, StoredHook } from "./types.js";

const call: Call = BACKGROUND_CONTEXT;

export type AcceptWork = (tx: Tx, conversationId: Id, input: string, requestId: string) => Promise<Id>;

/**
 * The final-answer boundary of a conversation's turn as the rig needs it: what the turn kinds' extension
 * point (kinds/services.ts FinalAnswerBoundary) gives, inside the commit that records the answer.
 */
export interface AnswerBoundary {
  readonly builder: TxBuilder;
  readonly conversationId: Id;
  /** The answered inputs: their `done` results are written in this commit. */
  readonly inputs: readonly Id[];
  readonly now: number;
  /** Accept `input` ahead of the queued followUps (the next group's first input); a used key accepts nothing. */
  acceptFirst(input: string, requestId: string): Promise<Id>;
}

/**
 * The request key of a GUPP acceptance: one per agent, conversation and assignment, so a retry never
 * accepts twice, and a replaced agent's work (a later attempt, usually on a new conversation) is never
 * answered as a duplicate of its predecessor's.
 */
export function guppRequestId(agentId: string, conversationId: Id, attempt: number): string {
  return `rig:${agentId}:${conversationId}:${attempt}`;
}

/** The input a work item becomes. */
export function workInput(work: { readonly bead_id: string; readonly title: string }): string {
  return `Work item ${work.bead_id}: ${work.title}`;
}

/**
 * Inside a running commit: an idle conversation agent's hook activates and `accept` takes its work item
 * as the conversation's input; undefined (nothing accepted) when the agent has no conversation or is
 * terminated, the hook has no work item, there is no `accept`, the conversation is in a turn or gone, or the rig is
 * paused.
 */
export async function activateInCommit(
  tx: Tx,
  accept: AcceptWork | undefined,
  agent: AgentRecord,
  stored: StoredHook,
  now: string,
): Promise<StoredHook | undefined> {
  const conversationId = agent.conversationId;
  if (
    conversationId === undefined ||
    accept === undefined ||
    agent.terminated !== undefined ||
    stored.file.work_item === null
  )
    return undefined;
  if (tx.builder.inTurn(conversationId)) return undefined;
  // A paused rig (an imported copy) accepts no work until an operator resumes it: the hook stays pending.
  if ((await tx.value(rigPaused).get()) !== undefined) return undefined;
  if ((await tx.getConversation(conversationId)) === undefined) return undefined;
  const inputId = await accept(
    tx,
    conversationId,
    workInput(stored.file.work_item),
    guppRequestId(agent.agent_id, conversationId, stored.attempt),
  );
  return { ...stored, file: nextFile("activate", stored.file, now), input: { conversationId, inputId } };
}

/** Activate a pending conversation agent's hook if its conversation is idle (one commit); false otherwise. */
export async function activatePending(
  harness: Harness,
  accept: AcceptWork | undefined,
  agentId: string,
): Promise<boolean> {
  return harness.commit(async (tx) => {
    const agent = await tx.value(agentValue(agentId)).get();
    const stored = await tx.value(hookValue(agentId)).get();
    if (agent === undefined || stored === undefined || stored.file.status !== "pending") return false;
    const next = await activateInCommit(tx, accept, agent, stored, iso(harness.now()));
    if (next === undefined) return false;
    setValue(tx, hookValue(agentId), next);
    return true;
  }, call);
}

/** Complete a conversation agent's hook once its input has its final answer (one commit, at most once). */
export async function completeAnswered(harness: Harness, agentId: string): Promise<boolean> {
  return harness.commit(async (tx) => {
    const stored = await tx.value(hookValue(agentId)).get();
    if (stored === undefined || stored.file.status !== "active" || stored.input === undefined) return false;
    if ((await tx.value(rigPaused).get()) !== undefined) return false;
    const result = await tx
      .value(bind(inputResult(stored.input.inputId), { conversationId: stored.input.conversationId }))
      .get();
    if (result?.status !== "done") return false;
    const next: StoredHook = { ...stored, file: nextFile("complete", stored.file, iso(harness.now())) };
    releaseBead(tx, stored);
    setValue(tx, hookValue(agentId), next);
    return true;
  }, call);
}

/**
 * GUPP at a conversation agent's final answer (the turn kit consults this inside the settlement commit
 * that records the answer): the answer of the hook's work item completes the hook in that commit, once;
 * a pending hook's work item is accepted first, ahead of the user's queued followUps, under the request
 * key of agent and attempt, and the hook activated, in that same commit.
 */
export async function settleAtFinalAnswer(boundary: AnswerBoundary): Promise<void> {
  const tx = sessionTx(boundary.builder);
  // A paused rig (an imported copy) completes and accepts nothing until an operator resumes it.
  if ((await tx.value(rigPaused).get()) !== undefined) return;
  const agentId = await tx.value(conversationAgent(boundary.conversationId)).get();
  if (agentId === undefined) return;
  const agent = await tx.value(agentValue(agentId)).get();
  const stored = await tx.value(hookValue(agentId)).get();
  if (agent === undefined || stored === undefined) return;
  const now = iso(boundary.now);
  if (
    stored.file.status === "active" &&
    stored.input !== undefined &&
    stored.input.conversationId === boundary.conversationId &&
    boundary.inputs.includes(stored.input.inputId)
  ) {
    releaseBead(tx, stored);
    setValue(tx, hookValue(agentId), { ...stored, file: nextFile("complete", stored.file, now) });
    return;
  }
  if (
    stored.file.status !== "pending" ||
    stored.file.work_item === null ||
    agent.terminated !== undefined ||
    agent.conversationId !== boundary.conversationId
  )
    return;
  const inputId = await boundary.acceptFirst(
    workInput(stored.file.work_item),
    guppRequestId(agentId, boundary.conversationId, stored.attempt),
  );
  setValue(tx, hookValue(agentId), {
    ...stored,
    file: nextFile("activate", stored.file, now),
    input: { conversationId: boundary.conversationId, inputId },
  });
}

/** Touch a conversation agent's active hook for its conversation's activity (throttled in the commit). */
export async function touchActive(harness: Harness, agentId: string): Promise<void> {
  await harness.commit(async (tx) => {
    const stored = await tx.value(hookValue(agentId)).get();
    if (stored === undefined || stored.file.status !== "active") return;
    const settings = await settingsTx(tx);
    const nowMs = harness.now();
    if (nowMs - Date.parse(stored.file.last_activity) < touchWindow(settings)) return;
    setValue(tx, hookValue(agentId), { ...stored, file: nextFile("touch", stored.file, iso(nowMs)) });
  }, call);
}
