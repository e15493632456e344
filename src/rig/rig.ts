/**
 * The rig (docs/rig.md; seeds 000 and 002): one session's Gastown layer over the core's commits
 * and state. Agents register, each with exactly one hook (the hook-persistence document's record, kept
 * as session state); every transition is one commit on the line, so it is an atomic compare-and-set;
 * durable mailboxes with separate ack records; live nudges; the witness's settings and health report.
 * The witness patrol itself is a background task kind (witness.ts).
 *
 * Reads never turn a failure into "no work": a hook read that fails rejects, and a registered agent
 * whose hook record is missing is an error, never an `empty` hook (Gastown treated both as idle).
 *
 * One concept over 400 lines: the Rig's operations. Each reads or commits the same state records
 * (state.ts) under the same access rules (access.ts).
 */
import { BACKGROUND_CONTEXT, type Call } from "../core/call.js";
import type { Harness } from "../core/harness.js";
import { inputResult } from "../core/inbox.js";
import { bind, bindTo, type ValueSpec } from "../core/state.js";
import { sessionTx, type Tx, type TxBuilder } from "../core/tx.js";
import type { Id, JsonValue } from "../storage/records.js";
import { checkActor, checkAgentId, checkMailbox, checkReader, ownMailbox, senderOf } from "./access.js";
import { RigError } from "./errors.js";
import { checkRole, checkStatus, emptyFile, iso, nextFile } from "./hooks.js";
import { NudgeBus } from "./nudges.js";
import { assess, readSettings, unreadReplies, type WitnessKind } from "./witness.js";
import {
  agentValue,
  beadValue,
  conversationAgent,
  HOOK_NAMESPACE,
  hookValue,
  legacyAgentIndex,
  mailAck,
  mailbox,
  otherAgentExists,
  retiredAttempt,
  scanAgents,
  settingsValue,
  witnessAgent,
  witnessFocus,
  witnessTask,
} from "./state.js";
import {
  actorName,
  DEFAULT_SETTINGS,
  MAYOR_ID,
  WITNESS_ID,
  type Actor,
  type AgentRecord,
  type AgentRole,
  type HookView,
  type MailAck,
  type MailMessage,
  type MailPayload,
  type StoredMail,
  type RigHealth,
  type RigSettings,
  type StoredHook,
  type Transition,
} from "./types.js";

const call: Call = BACKGROUND_CONTEXT;

/** What the host plugs in. */
export interface RigOptions {
  /** The witness task kind registered with the harness (created with `createWitnessKind`). */
  readonly witness: WitnessKind;
  /** The rig's name (`rigName` of health reports): the session's name, when the host knows it. */
  readonly name?: string;
  /**
   * GUPP for conversation agents: accept `input` as the conversation's input inside the running commit
   * (the turn kinds' accept, "the user hit enter"), under `requestId`; returns the inputId. Without it,
   * conversation agents' hooks stay pending until activated over HTTP.
   */
  readonly accept?: AcceptWork;
  /** Conversation values a new agent conversation copies from the root (its model and generation config). */
  readonly conversationValues?: readonly ValueSpec<unknown>[];
}

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

export interface RegisterRequest {
  readonly role: AgentRole;
  readonly conversation?: Id | "new";
}

export interface TransitionRequest {
  readonly work?: { readonly bead_id: string; readonly title: string };
  readonly attempt?: number;
  /** `If-Match`: the version the caller last saw. */
  readonly ifMatch?: number;
  readonly summary?: string;
}

export interface TransitionResult extends HookView {
  /** False for a throttled touch that wrote nothing. */
  readonly written: boolean;
}

export interface AgentListing {
  readonly agent: AgentRecord;
  readonly hook: HookView;
}

export interface MailView extends MailMessage {
  readonly ack?: MailAck;
}

/** A page of a mailbox: its messages in order, and the cursor of the next page while more remain. */
export interface MailPage {
  readonly messages: readonly MailView[];
  readonly next?: Id;
}

/** The largest mailbox page (and the default). */
export const MAIL_PAGE = 1000;

export class Rig {
  readonly harness: Harness;
  readonly nudges = new NudgeBus();
  readonly #witness: WitnessKind;
  readonly #accept: AcceptWork | undefined;
  readonly #inherit: readonly ValueSpec<unknown>[];
  /** Whether this object has checked for (and dropped) the old one-value agent index. */
  #legacyChecked = false;
  name: string;

  constructor(harness: Harness, options: RigOptions) {
    this.harness = harness;
    this.#witness = options.witness;
    this.#accept = options.accept;
    this.#inherit = options.conversationValues ?? [];
    this.name = options.name ?? "rig";
  }

  now(): number {
    return this.harness.now();
  }

  // agents -------------------------------------------------------------------------------------

  /** Register an agent with an empty hook (mayor or operator); the same registration again writes nothing. */
  async register(actor: Actor, agentId: string, request: RegisterRequest): Promise<{ readonly created: boolean; readonly agent: AgentRecord }> {
    if (actor.role !== "mayor" && actor.role !== "operator") throw new RigError("rig_forbidden", `only the mayor or an operator registers agents (this token's role is ${actor.role})`);
    checkAgentId(agentId);
    return this.harness.commit(async (tx) => {
      const existing = await tx.value(agentValue(agentId)).get();
      if (existing !== undefined) {
        const same = existing.role === request.role && (request.conversation === undefined ? existing.conversationId === undefined : request.conversation === "new" ? existing.conversationId !== undefined : existing.conversationId === request.conversation);
        if (!same) throw new RigError("agent_conflict", `agent ${agentId} is registered as ${existing.role}${existing.conversationId === undefined ? " (external)" : ` on conversation ${existing.conversationId}`}`);
        return { created: false, agent: existing };
      }
      let conversationId: Id | undefined;
      if (request.conversation === "new") {
        const created = tx.createConversation({});
        conversationId = created;
        for (const spec of this.#inherit) {
          const value = await tx.value(bindTo(spec, this.harness.rootId)).get();
          if (value !== undefined) tx.value(bindTo(spec, created)).set(value);
        }
      } else if (request.conversation !== undefined) {
        if ((await tx.getConversation(request.conversation)) === undefined) throw new RigError("rig_invalid", `conversation ${request.conversation} does not exist`, "conversation");
        const holder = await tx.value(conversationAgent(request.conversation)).get();
        if (holder !== undefined) throw new RigError("agent_conflict", `conversation ${request.conversation} already drives agent ${holder}`, "conversation");
        conversationId = request.conversation;
      }
      const now = iso(this.now());
      const agent: AgentRecord = {
        agent_id: agentId,
        role: request.role,
        ...(conversationId === undefined ? {} : { conversationId }),
        registered_at: now,
        registered_by: actorName(actor),
      };
      // The agent is its own row (the rig's agents are a keyed scan of them): no index value to rewrite.
      await this.#dropLegacyIndex(tx);
      tx.value(agentValue(agentId)).set(agent);
      // Attempts continue from the agent id's last (a stale completion of a predecessor names an older
      // attempt), and the agent starts with an empty mailbox (message ids are never reused, so no ack of
      // a predecessor's message attaches to a new one).
      const attempt = (await tx.value(retiredAttempt(agentId)).get()) ?? 0;
      tx.value(retiredAttempt(agentId)).delete();
      tx.value(hookValue(agentId)).set({ file: emptyFile(agentId, now), attempt });
      tx.list(mailbox(agentId)).clear();
      if (conversationId !== undefined) tx.value(conversationAgent(conversationId)).set(agentId);
      // The witness starts with the first agent.
      const witness = await tx.value(witnessTask).get();
      if (witness === undefined) {
        const settings = await settingsTx(tx);
        const id = tx.task(this.#witness, {
          conversationId: this.harness.rootId,
          state: { status: "scheduled", next_patrol_at: this.now() + settings.patrolIntervalMs },
          background: true,
        });
        tx.value(witnessTask).set(id);
      }
      return { created: true, agent };
    }, call);
  }

  /** Deregister an agent whose hook is empty (mayor); the witness ends with the last agent. */
  async deregister(actor: Actor, agentId: string): Promise<{ readonly deleted: true }> {
    if (actor.role !== "mayor") throw new RigError("rig_forbidden", `only the mayor deregisters agents (this token's role is ${actor.role})`);
    checkAgentId(agentId);
    const ended = await this.harness.commit(async (tx) => {
      const agent = await tx.value(agentValue(agentId)).get();
      if (agent === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      const stored = await readHookTx(tx, agentId);
      if (stored.file.status !== "empty") throw new RigError("agent_conflict", `agent ${agentId}'s hook is ${stored.file.status}; clear it before deregistering`);
      await this.#dropLegacyIndex(tx);
      tx.value(agentValue(agentId)).delete();
      tx.value(hookValue(agentId)).delete();
      // The id's last attempt outlives the agent; its mailbox does not.
      if (stored.attempt > 0) tx.value(retiredAttempt(agentId)).set(stored.attempt);
      tx.list(mailbox(agentId)).clear();
      if (agent.conversationId !== undefined) tx.value(conversationAgent(agent.conversationId)).delete();
      // The witness ends with the last agent: one page of at most two agent rows says whether another remains.
      if (await otherAgentExists(this.harness.storage, agentId)) return undefined;
      const witness = await tx.value(witnessTask).get();
      if (witness !== undefined) tx.value(witnessTask).delete();
      return witness;
    }, call);
    if (ended !== undefined) await this.harness.abortTask(ended, call).catch(() => undefined);
    return { deleted: true };
  }

  /** Terminate an agent (mayor only): recorded with who did it; a conversation agent's work is aborted; nothing is cleared. */
  async terminate(actor: Actor, agentId: string): Promise<AgentRecord> {
    if (actor.role !== "mayor") throw new RigError("rig_forbidden", `only the mayor terminates agents (this token's role is ${actor.role})`);
    checkAgentId(agentId);
    const agent = await this.harness.commit(async (tx) => {
      const current = await tx.value(agentValue(agentId)).get();
      if (current === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      if (current.terminated !== undefined) return current;
      const next: AgentRecord = { ...current, terminated: { by: actorName(actor), at: iso(this.now()) } };
      await this.#dropLegacyIndex(tx);
      tx.value(agentValue(agentId)).set(next);
      return next;
    }, call);
    if (agent.conversationId !== undefined) await (await this.harness.conversation(agent.conversationId, call))?.abort(call);
    return agent;
  }

  async agent(agentId: string): Promise<AgentRecord> {
    const agent = await this.#read(agentValue(agentId));
    if (agent === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
    return agent;
  }

  /** Every agent with its hook, in agent id order (a keyed scan of the agent rows, a page at a time). */
  async agents(): Promise<AgentListing[]> {
    const out: AgentListing[] = [];
    for await (const agent of scanAgents(this.harness.storage)) out.push({ agent, hook: await this.readHook(agent.agent_id) });
    return out;
  }

  /** The agent a conversation drives, if any. */
  conversationAgent(conversationId: Id): Promise<string | undefined> {
    return this.#read(conversationAgent(conversationId));
  }

  // hooks --------------------------------------------------------------------------------------

  /** An agent's hook with its version; a failed read rejects and a missing record is an error, never `empty`. */
  async readHook(agentId: string): Promise<HookView> {
    const version = await this.harness.storage.getValue(bind(hookValue(agentId), {}));
    if (version === undefined) {
      if ((await this.#read(agentValue(agentId))) === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      throw new Error(`agent ${agentId} has no hook record`);
    }
    const nudged = await this.#read(witnessAgent(agentId));
    const bead = version.value.file.work_item?.bead_id;
    const nudges = nudged !== undefined && bead !== undefined && nudged.bead_id === bead && nudged.nudges > 0 ? { count: nudged.nudges, lastAt: iso(nudged.last_nudge_at) } : undefined;
    return { ...view(version.value, version.seq), ...(nudges === undefined ? {} : { nudges }) };
  }

  /** Read a hook as `actor` may: the mayor and operators any, an agent its own. */
  async hookFor(actor: Actor, agentId: string): Promise<HookView> {
    checkReader(actor, agentId);
    return this.readHook(agentId);
  }

  /** Long poll: the hook once it is no longer `empty`, or as it is after `waitMs`. */
  async waitHook(actor: Actor, agentId: string, waitMs: number): Promise<HookView> {
    checkReader(actor, agentId);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const changed = this.#nextHookWrite(agentId, Math.max(0, deadline - Date.now()));
      const current = await this.readHook(agentId);
      if (current.hook.status !== "empty" || Date.now() >= deadline) {
        changed.cancel();
        return current;
      }
      if (!(await changed.promise)) return this.readHook(agentId);
    }
  }

  /** One transition as one commit: role, If-Match, attempt and status checks, then the write. */
  async transition(actor: Actor, agentId: string, transition: Transition, request: TransitionRequest = {}): Promise<TransitionResult> {
    checkActor(actor);
    checkAgentId(agentId);
    checkRole(transition, actor, agentId);
    let orphan: Id | undefined;
    const result = await this.harness.commit(async (tx): Promise<TransitionResult> => {
      orphan = undefined;
      const agent = await tx.value(agentValue(agentId)).get();
      if (agent === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      const current = await readVersion(this, agentId);
      if (current === undefined) throw new Error(`agent ${agentId} has no hook record`);
      if (request.ifMatch !== undefined && request.ifMatch !== current.seq) {
        throw new RigError("precondition_failed", `If-Match names version ${request.ifMatch}; the hook is at version ${current.seq}`, "if-match");
      }
      // An empty hook has no assignment to compare with: the status check below names it.
      if (request.attempt !== undefined && transition !== "set" && transition !== "clear" && current.value.file.status !== "empty" && request.attempt !== current.value.attempt) {
        throw new RigError("stale_attempt", `attempt ${request.attempt} is not the hook's current assignment (attempt ${current.value.attempt})`, "attempt");
      }
      const stored = current.value;
      // A terminated agent takes no new work and makes no transition of its own; the mayor may still
      // clear its hook to reassign the work.
      if (agent.terminated !== undefined && transition !== "clear") {
        throw new RigError("agent_terminated", `agent ${agentId} is terminated (by ${agent.terminated.by} at ${agent.terminated.at}); its hook is ${stored.file.status}`);
      }
      checkStatus(transition, stored.file.status);
      const nowMs = this.now();
      if (transition === "touch") {
        const settings = await settingsTx(tx);
        const last = Date.parse(stored.file.last_activity);
        const nudged = await tx.value(witnessAgent(agentId)).get();
        const answersNudge = nudged !== undefined && nudged.nudges > 0 && nudged.last_nudge_at >= last;
        if (!answersNudge && nowMs - last < settings.touchThrottleMs) return { ...view(stored, current.seq), written: false };
      }
      const now = iso(nowMs);
      let next: StoredHook;
      switch (transition) {
        case "set": {
          const work = request.work;
          if (work === undefined) throw new RigError("rig_invalid", "set needs bead_id and title", "bead_id");
          const holder = await tx.value(beadValue(work.bead_id)).get();
          if (holder !== undefined) throw new RigError("bead_already_hooked", `bead ${work.bead_id} is already hooked on agent ${holder.agent_id} (attempt ${holder.attempt})`, "bead_id");
          next = { file: nextFile("set", stored.file, now, work), attempt: stored.attempt + 1 };
          tx.value(beadValue(work.bead_id)).set({ agent_id: agentId, attempt: next.attempt });
          // GUPP: an idle conversation agent activates and accepts the work in this same commit.
          next = (await this.#guppActivate(tx, agent, next, now)) ?? next;
          break;
        }
        case "complete": {
          next = { file: nextFile("complete", stored.file, now), attempt: stored.attempt, ...(request.summary === undefined ? {} : { summary: request.summary }) };
          releaseBead(tx, stored);
          break;
        }
        case "clear": {
          next = { file: nextFile("clear", stored.file, now), attempt: stored.attempt };
          if (stored.file.status !== "completed") releaseBead(tx, stored);
          // A conversation agent's active hook: its work item's input, unless already answered, is aborted
          // after this commit (the reassigned work must not keep running on the old agent).
          if (stored.file.status === "active" && stored.input !== undefined) {
            const result = await tx.value(bind(inputResult(stored.input.inputId), { conversationId: stored.input.conversationId })).get();
            if (result === undefined || result.status === "queued" || result.status === "placed") orphan = stored.input.conversationId;
          }
          break;
        }
        case "activate":
        case "touch":
          next = { ...stored, file: nextFile(transition, stored.file, now) };
          break;
        default: {
          const never: never = transition;
          throw new TypeError(`unknown transition ${String(never)}`);
        }
      }
      const seq = setValue(tx, hookValue(agentId), next);
      return { ...view(next, seq), written: true };
    }, call);
    // The cleared hook's work item stops: its conversation's work is aborted (the conversation is the
    // agent's own; the agent stays registered and takes the next assignment once it is idle).
    if (orphan !== undefined) await (await this.harness.conversation(orphan, call))?.abort(call);
    return result;
  }

  // GUPP (conversation agents) ----------------------------------------------------------------

  /** Activate a pending conversation agent's hook if its conversation is idle (one commit); false otherwise. */
  async guppActivate(agentId: string): Promise<boolean> {
    return this.harness.commit(async (tx) => {
      const agent = await tx.value(agentValue(agentId)).get();
      const stored = await tx.value(hookValue(agentId)).get();
      if (agent === undefined || stored === undefined || stored.file.status !== "pending") return false;
      const next = await this.#guppActivate(tx, agent, stored, iso(this.now()));
      if (next === undefined) return false;
      setValue(tx, hookValue(agentId), next);
      return true;
    }, call);
  }

  /** Complete a conversation agent's hook once its input has its final answer (one commit, at most once). */
  async guppComplete(agentId: string): Promise<boolean> {
    return this.harness.commit(async (tx) => {
      const stored = await tx.value(hookValue(agentId)).get();
      if (stored === undefined || stored.file.status !== "active" || stored.input === undefined) return false;
      const result = await tx.value(bind(inputResult(stored.input.inputId), { conversationId: stored.input.conversationId })).get();
      if (result?.status !== "done") return false;
      const next: StoredHook = { ...stored, file: nextFile("complete", stored.file, iso(this.now())) };
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
  async atFinalAnswer(boundary: AnswerBoundary): Promise<void> {
    const tx = sessionTx(boundary.builder);
    const agentId = await tx.value(conversationAgent(boundary.conversationId)).get();
    if (agentId === undefined) return;
    const agent = await tx.value(agentValue(agentId)).get();
    const stored = await tx.value(hookValue(agentId)).get();
    if (agent === undefined || stored === undefined) return;
    const now = iso(boundary.now);
    if (stored.file.status === "active" && stored.input !== undefined && stored.input.conversationId === boundary.conversationId && boundary.inputs.includes(stored.input.inputId)) {
      releaseBead(tx, stored);
      setValue(tx, hookValue(agentId), { ...stored, file: nextFile("complete", stored.file, now) });
      return;
    }
    if (stored.file.status !== "pending" || stored.file.work_item === null || agent.terminated !== undefined || agent.conversationId !== boundary.conversationId) return;
    const inputId = await boundary.acceptFirst(workInput(stored.file.work_item), guppRequestId(agentId, boundary.conversationId, stored.attempt));
    setValue(tx, hookValue(agentId), { ...stored, file: nextFile("activate", stored.file, now), input: { conversationId: boundary.conversationId, inputId } });
  }

  /** Touch a conversation agent's active hook for its conversation's activity (throttled in the commit). */
  async guppTouch(agentId: string): Promise<void> {
    await this.harness.commit(async (tx) => {
      const stored = await tx.value(hookValue(agentId)).get();
      if (stored === undefined || stored.file.status !== "active") return;
      const settings = await settingsTx(tx);
      const nowMs = this.now();
      if (nowMs - Date.parse(stored.file.last_activity) < settings.touchThrottleMs) return;
      setValue(tx, hookValue(agentId), { ...stored, file: nextFile("touch", stored.file, iso(nowMs)) });
    }, call);
  }

  async #guppActivate(tx: Tx, agent: AgentRecord, stored: StoredHook, now: string): Promise<StoredHook | undefined> {
    const conversationId = agent.conversationId;
    if (conversationId === undefined || this.#accept === undefined || agent.terminated !== undefined || stored.file.work_item === null) return undefined;
    if (tx.builder.inTurn(conversationId)) return undefined;
    if ((await tx.getConversation(conversationId)) === undefined) return undefined;
    const inputId = await this.#accept(tx, conversationId, workInput(stored.file.work_item), guppRequestId(agent.agent_id, conversationId, stored.attempt));
    return { ...stored, file: nextFile("activate", stored.file, now), input: { conversationId, inputId } };
  }

  // mail ---------------------------------------------------------------------------------------

  /**
   * A page of a mailbox as `actor` may read it (an agent its own; the mayor and operators the mayor's or
   * any), by cursor: the messages after `after`, at most `limit` (1-1,000, default 1,000).
   */
  async mail(actor: Actor, owner?: string, query: { readonly after?: Id; readonly limit?: number } = {}): Promise<MailPage> {
    const box = owner ?? ownMailbox(actor);
    checkMailbox(actor, box);
    const limit = query.limit ?? MAIL_PAGE;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAIL_PAGE) throw new RigError("rig_invalid", `limit is an integer from 1 to ${MAIL_PAGE}`, "limit");
    const list = await this.harness.storage.readList(bind(mailbox(box), {}), { after: query.after ?? 0, limit });
    const messages: MailView[] = [];
    for (const element of list.items) messages.push(mailView(element.id, element.value, await this.#read(mailAck(box, element.id))));
    return { messages, ...(list.next === undefined ? {} : { next: list.next }) };
  }

  /** Every message of a mailbox, page by page, without acks (the `.chipset/state` export). */
  async *mailbox(box: string): AsyncGenerator<MailMessage> {
    let after: Id = 0;
    for (;;) {
      const list = await this.harness.storage.readList(bind(mailbox(box), {}), { after, limit: MAIL_PAGE });
      for (const element of list.items) yield mailView(element.id, element.value, undefined);
      if (list.next === undefined) return;
      after = list.next;
    }
  }

  /** Send durable mail (`to`: an agent id, `mayor` or `witness`). */
  async send(actor: Actor, to: string, payload: MailPayload): Promise<MailMessage> {
    checkActor(actor);
    const sender = senderOf(actor);
    if (to !== MAYOR_ID && to !== WITNESS_ID) checkAgentId(to, "to");
    return this.harness.commit(async (tx) => {
      if (to !== MAYOR_ID && to !== WITNESS_ID && (await tx.value(agentValue(to)).get()) === undefined) throw new RigError("agent_not_found", `agent ${to} is not registered`, "to");
      const message: Omit<MailMessage, "id"> = { from: actorName(actor), to, channel: "mail", payload, timestamp: iso(this.now()), durable: true };
      const id = tx.list(mailbox(to)).append({ ...message, sender });
      return { id, ...message };
    }, call);
  }

  /** Acknowledge a message of one's own mailbox: a separate record; the message never changes. */
  async ack(actor: Actor, id: Id): Promise<MailView> {
    const box = ownMailbox(actor);
    return this.harness.commit(async (tx) => {
      const page = await tx.list(mailbox(box)).read({ after: id - 1, limit: 1 });
      const element = page.items[0];
      if (element === undefined || element.id !== id) throw new RigError("mail_not_found", `mailbox ${box} has no message ${id}`);
      const prior = await tx.value(mailAck(box, id)).get();
      if (prior !== undefined) return mailView(id, element.value, prior);
      const ack: MailAck = { by: actorName(actor), at: iso(this.now()) };
      tx.value(mailAck(box, id)).set(ack);
      return mailView(id, element.value, ack);
    }, call);
  }

  // settings -----------------------------------------------------------------------------------

  async settings(): Promise<RigSettings> {
    return { ...DEFAULT_SETTINGS, ...((await this.#read(settingsValue)) ?? {}) };
  }

  async patchSettings(actor: Actor, patch: Partial<RigSettings>): Promise<RigSettings> {
    if (actor.role !== "mayor" && actor.role !== "operator") throw new RigError("rig_forbidden", `only the mayor or an operator configures the witness (this token's role is ${actor.role})`);
    const { settings, witness } = await this.harness.commit(async (tx) => {
      const current = (await tx.value(settingsValue).get()) ?? {};
      const next = { ...current, ...patch };
      tx.value(settingsValue).set(next);
      return { settings: { ...DEFAULT_SETTINGS, ...next }, witness: await tx.value(witnessTask).get() };
    }, call);
    // A shorter patrol interval applies at once: the witness's sleep ends and it re-plans in its own
    // commit (the host never patches the witness's task, §6.1).
    if (witness !== undefined && patch.patrolIntervalMs !== undefined) await this.harness.driver.interruptSleep(witness);
    return settings;
  }

  // health -------------------------------------------------------------------------------------

  /** The witness document's RigHealthReport (plus pending and not-started agents), read-only. */
  async health(): Promise<RigHealth> {
    const reader = { get: <T>(spec: ValueSpec<T>) => this.#read(spec), agents: () => scanAgents(this.harness.storage) };
    const settings = await readSettings(reader);
    // Replies the witness has not read yet count as activity too (it records them at its next patrol).
    const replies = await unreadReplies(reader, async (after) => (await this.harness.storage.readList(bind(mailbox(WITNESS_ID), {}), { after, limit: 1000 })).items);
    return (await assess(reader, this.now(), this.name, settings, replies, await reader.get(witnessFocus))).health;
  }

  // internals ----------------------------------------------------------------------------------

  /**
   * A rig written before agents were rows keeps its old index value (every agent also has its row, so
   * nothing is lost): the first agent commit of this object drops it. Read once per object lifetime.
   */
  async #dropLegacyIndex(tx: Tx): Promise<void> {
    if (this.#legacyChecked) return;
    // Marked checked only once it reads absent: a commit that deletes it and then refuses writes nothing.
    if ((await this.harness.storage.getValue(bind(legacyAgentIndex, {}))) === undefined) this.#legacyChecked = true;
    else tx.value(legacyAgentIndex).delete();
  }

  async #read<T>(spec: ValueSpec<T>): Promise<T | undefined> {
    return (await this.harness.storage.getValue(bind(spec, {})))?.value;
  }

  /** Resolves true at the next durable write of `agentId`'s hook, false after `ms`. */
  #nextHookWrite(agentId: string, ms: number): { readonly promise: Promise<boolean>; cancel(): void } {
    let stop: () => void = () => undefined;
    const promise = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), ms);
      const off = this.harness.onCommit((commit) => {
        if (commit.batch.kind !== "main") return;
        for (const write of commit.batch.writes) {
          if ((write.type === "value.set" || write.type === "value.delete") && write.addr.namespace === HOOK_NAMESPACE && write.addr.key === agentId) finish(true);
        }
      });
      const finish = (value: boolean): void => {
        clearTimeout(timer);
        off();
        resolve(value);
      };
      stop = () => finish(false);
    });
    return { promise, cancel: () => stop() };
  }
}

function view(stored: StoredHook, seq: Id): HookView {
  return { hook: stored.file, version: seq, attempt: stored.attempt, ...(stored.summary === undefined ? {} : { summary: stored.summary }) };
}

async function readVersion(rig: Rig, agentId: string): Promise<{ readonly seq: Id; readonly value: StoredHook } | undefined> {
  return rig.harness.storage.getValue(bind(hookValue(agentId), {}));
}

async function readHookTx(tx: Tx, agentId: string): Promise<StoredHook> {
  const stored = await tx.value(hookValue(agentId)).get();
  if (stored === undefined) throw new Error(`agent ${agentId} has no hook record`);
  return stored;
}

/** Set a session value and return the sequence its write gets (the hook's version). */
function setValue<T>(tx: Tx, spec: ValueSpec<T>, value: T): Id {
  return tx.builder.push({ type: "value.set", addr: bind(spec, {}), value: value as unknown as JsonValue });
}

function releaseBead(tx: Tx, stored: StoredHook): void {
  if (stored.file.work_item !== null) tx.value(beadValue(stored.file.work_item.bead_id)).delete();
}

async function settingsTx(tx: Tx): Promise<RigSettings> {
  return { ...DEFAULT_SETTINGS, ...((await tx.value(settingsValue).get()) ?? {}) };
}

/** A stored message as callers see it: its id, the document's fields, its ack; the sender's role stays inside. */
function mailView(id: Id, stored: StoredMail, ack: MailAck | undefined): MailView {
  const { sender: _sender, ...message } = stored;
  return { id, ...message, ...(ack === undefined ? {} : { ack }) };
}
