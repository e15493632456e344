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
 * This file is the `Rig` that hosts call, with its agents and their hooks. What it offers beside them
 * lives in one file each and is run from here: the GUPP commits (gupp-commits.ts), mail (mail.ts), and
 * the witness's settings and health report (witness-admin.ts). Every one reads or commits the same state
 * records (state.ts) under the same access rules (access.ts).
 */
import { BACKGROUND_CONTEXT, type Call } from "../core/call.js";
import type { Harness } from "../core/harness.js";
import { inputResult } from "../core/inbox.js";
import { bind, bindTo, type ValueSpec } from "../core/state.js";
import type { Tx } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { checkActor, checkAgentId, checkReader } from "./access.js";
import { RigError } from "./errors.js";
import {
  activateInCommit,
  activatePending,
  completeAnswered,
  settleAtFinalAnswer,
  touchActive,
  type AcceptWork,
  type AnswerBoundary,
} from "./gupp-commits.js";
import { checkRole, checkStatus, emptyFile, iso, nextFile, touchWindow } from "./hooks.js";
import { ackMail, mailboxMessages, readMail, sendMail, type MailPage, type MailView } from "./mail.js";
import { NudgeBus } from "./nudges.js";
import type { WitnessKind } from "./witness.js";
import { patchWitnessSettings, rigHealth, witnessSettings } from "./witness-admin.js";
import {
  agentValue,
  beadValue,
  conversationAgent,
  HOOK_NAMESPACE,
  hookValue,
  legacyAgentIndex,
  mailbox,
  otherAgentExists,
  readValue,
  releaseBead,
  retiredAttempt,
  scanAgents,
  setValue,
  settingsTx,
  witnessAgent,
  witnessTask,
} from "./state.js";
import {
  actorName,
  type Actor,
  type AgentRecord,
  type AgentRole,
  type HookView,
  type MailMessage,
  type MailPayload,
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
  async register(
    actor: Actor,
    agentId: string,
    request: RegisterRequest,
  ): Promise<{ readonly created: boolean; readonly agent: AgentRecord }> {
    if (actor.role !== "mayor" && actor.role !== "operator")
      throw new RigError(
        "rig_forbidden",
        `only the mayor or an operator registers agents (this token's role is ${actor.role})`,
      );
    checkAgentId(agentId);
    return this.harness.commit(async (tx) => {
      const existing = await tx.value(agentValue(agentId)).get();
      if (existing !== undefined) {
        const same =
          existing.role === request.role &&
          (request.conversation === undefined
            ? existing.conversationId === undefined
            : request.conversation === "new"
              ? existing.conversationId !== undefined
              : existing.conversationId === request.conversation);
        if (!same)
          throw new RigError(
            "agent_conflict",
            `agent ${agentId} is registered as ${existing.role}${existing.conversationId === undefined ? " (external)" : ` on conversation ${existing.conversationId}`}`,
          );
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
        if ((await tx.getConversation(request.conversation)) === undefined)
          throw new RigError("rig_invalid", `conversation ${request.conversation} does not exist`, "conversation");
        const holder = await tx.value(conversationAgent(request.conversation)).get();
        if (holder !== undefined)
          throw new RigError(
            "agent_conflict",
            `conversation ${request.conversation} already drives agent ${holder}`,
            "conversation",
          );
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
    if (actor.role !== "mayor")
      throw new RigError("rig_forbidden", `only the mayor deregisters agents (this token's role is ${actor.role})`);
    checkAgentId(agentId);
    const ended = await this.harness.commit(async (tx) => {
      const agent = await tx.value(agentValue(agentId)).get();
      if (agent === undefined) throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      const stored = await readHookTx(tx, agentId);
      if (stored.file.status !== "empty")
        throw new RigError(
          "agent_conflict",
          `agent ${agentId}'s hook is ${stored.file.status}; clear it before deregistering`,
        );
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

  /**
   * Terminate an agent (mayor only): recorded with who did it; a conversation agent's work is aborted; nothing is
   * cleared.
   */
  async terminate(actor: Actor, agentId: string): Promise<AgentRecord> {
    if (actor.role !== "mayor")
      throw new RigError("rig_forbidden", `only the mayor terminates agents (this token's role is ${actor.role})`);
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
    if (agent.conversationId !== undefined)
      await (await this.harness.conversation(agent.conversationId, call))?.abort(call);
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
    for await (const agent of scanAgents(this.harness.storage))
      out.push({ agent, hook: await this.readHook(agent.agent_id) });
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
      if ((await this.#read(agentValue(agentId))) === undefined)
        throw new RigError("agent_not_found", `agent ${agentId} is not registered`);
      throw new Error(`agent ${agentId} has no hook record`);
    }
    const nudged = await this.#read(witnessAgent(agentId));
    const bead = version.value.file.work_item?.bead_id;
    const nudges =
      nudged !== undefined && bead !== undefined && nudged.bead_id === bead && nudged.nudges > 0
        ? { count: nudged.nudges, lastAt: iso(nudged.last_nudge_at) }
        : undefined;
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
  async transition(
    actor: Actor,
    agentId: string,
    transition: Transition,
    request: TransitionRequest = {},
  ): Promise<TransitionResult> {
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
        throw new RigError(
          "precondition_failed",
          `If-Match names version ${request.ifMatch}; the hook is at version ${current.seq}`,
          "if-match",
        );
      }
      // An empty hook has no assignment to compare with: the status check below names it.
      if (
        request.attempt !== undefined &&
        transition !== "set" &&
        transition !== "clear" &&
        current.value.file.status !== "empty" &&
        request.attempt !== current.value.attempt
      ) {
        throw new RigError(
          "stale_attempt",
          `attempt ${request.attempt} is not the hook's current assignment (attempt ${current.value.attempt})`,
          "attempt",
        );
      }
      const stored = current.value;
      // A terminated agent takes no new work and makes no transition of its own; the mayor may still
      // clear its hook to reassign the work.
      if (agent.terminated !== undefined && transition !== "clear") {
        throw new RigError(
          "agent_terminated",
          `agent ${agentId} is terminated (by ${agent.terminated.by} at ${agent.terminated.at}); its hook is ${stored.file.status}`,
        );
      }
      checkStatus(transition, stored.file.status);
      const nowMs = this.now();
      if (transition === "touch") {
        const settings = await settingsTx(tx);
        const last = Date.parse(stored.file.last_activity);
        const nudged = await tx.value(witnessAgent(agentId)).get();
        const answersNudge = nudged !== undefined && nudged.nudges > 0 && nudged.last_nudge_at >= last;
        if (!answersNudge && nowMs - last < touchWindow(settings))
          return { ...view(stored, current.seq), written: false };
      }
      const now = iso(nowMs);
      let next: StoredHook;
      switch (transition) {
        case "set": {
          const work = request.work;
          if (work === undefined) throw new RigError("rig_invalid", "set needs bead_id and title", "bead_id");
          const holder = await tx.value(beadValue(work.bead_id)).get();
          if (holder !== undefined)
            throw new RigError(
              "bead_already_hooked",
              `bead ${work.bead_id} is already hooked on agent ${holder.agent_id} (attempt ${holder.attempt})`,
              "bead_id",
            );
          next = { file: nextFile("set", stored.file, now, work), attempt: stored.attempt + 1 };
          tx.value(beadValue(work.bead_id)).set({ agent_id: agentId, attempt: next.attempt });
          // GUPP: an idle conversation agent activates and accepts the work in this same commit.
          next = (await activateInCommit(tx, this.#accept, agent, next, now)) ?? next;
          break;
        }
        case "complete": {
          next = {
            file: nextFile("complete", stored.file, now),
            attempt: stored.attempt,
            ...(request.summary === undefined ? {} : { summary: request.summary }),
          };
          releaseBead(tx, stored);
          break;
        }
        case "clear": {
          next = { file: nextFile("clear", stored.file, now), attempt: stored.attempt };
          if (stored.file.status !== "completed") releaseBead(tx, stored);
          // A conversation agent's active hook: its work item's input, unless already answered, is aborted
          // after this commit (the reassigned work must not keep running on the old agent).
          if (stored.file.status === "active" && stored.input !== undefined) {
            const result = await tx
              .value(bind(inputResult(stored.input.inputId), { conversationId: stored.input.conversationId }))
              .get();
            if (result === undefined || result.status === "queued" || result.status === "placed")
              orphan = stored.input.conversationId;
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

  // GUPP (conversation agents; gupp-commits.ts) -----------------------------------------------

  /** Activate a pending conversation agent's hook if its conversation is idle (one commit); false otherwise. */
  async guppActivate(agentId: string): Promise<boolean> {
    return activatePending(this.harness, this.#accept, agentId);
  }

  /** Complete a conversation agent's hook once its input has its final answer (one commit, at most once). */
  async guppComplete(agentId: string): Promise<boolean> {
    return completeAnswered(this.harness, agentId);
  }

  /**
   * GUPP at a conversation agent's final answer, inside the settlement commit that records it (`settleAtFinalAnswer`).
   */
  async atFinalAnswer(boundary: AnswerBoundary): Promise<void> {
    return settleAtFinalAnswer(boundary);
  }

  /** Touch a conversation agent's active hook for its conversation's activity (throttled in the commit). */
  async guppTouch(agentId: string): Promise<void> {
    return touchActive(this.harness, agentId);
  }

  // mail (mail.ts) ------------------------------------------------------------------------------

  /**
   * A page of a mailbox as `actor` may read it (an agent its own; the mayor and operators the mayor's or
   * any), by cursor: the messages after `after`, at most `limit` (1-1,000, default 1,000).
   */
  async mail(
    actor: Actor,
    owner?: string,
    query: { readonly after?: Id; readonly limit?: number } = {},
  ): Promise<MailPage> {
    return readMail(this.harness, actor, owner, query);
  }

  /** Every message of a mailbox, page by page, without acks (the `.chipset/state` export). */
  mailbox(box: string): AsyncGenerator<MailMessage> {
    return mailboxMessages(this.harness, box);
  }

  /** Send durable mail (`to`: an agent id, `mayor` or `witness`). */
  async send(actor: Actor, to: string, payload: MailPayload): Promise<MailMessage> {
    return sendMail(this.harness, actor, to, payload);
  }

  /** Acknowledge a message of one's own mailbox: a separate record; the message never changes. */
  async ack(actor: Actor, id: Id): Promise<MailView> {
    return ackMail(this.harness, actor, id);
  }

  // the witness's settings and health (witness-admin.ts) ------------------------------------------

  async settings(): Promise<RigSettings> {
    return witnessSettings(this.harness);
  }

  async patchSettings(actor: Actor, patch: Partial<RigSettings>): Promise<RigSettings> {
    return patchWitnessSettings(this.harness, actor, patch);
  }

  /** The witness document's RigHealthReport (plus pending and not-started agents), read-only. */
  async health(): Promise<RigHealth> {
    return rigHealth(this);
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
    return readValue(this.harness.storage, spec);
  }

  /** Resolves true at the next durable write of `agentId`'s hook, false after `ms`. */
  #nextHookWrite(agentId: string, ms: number): { readonly promise: Promise<boolean>; cancel(): void } {
    let stop: () => void = () => undefined;
    const promise = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), ms);
      const off = this.harness.onCommit((commit) => {
        if (commit.batch.kind !== "main") return;
        for (const write of commit.batch.writes) {
          if (
            (write.type === "value.set" || write.type === "value.delete") &&
            write.addr.namespace === HOOK_NAMESPACE &&
            write.addr.key === agentId
          )
            finish(true);
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
  return {
    hook: stored.file,
    version: seq,
    attempt: stored.attempt,
    ...(stored.summary === undefined ? {} : { summary: stored.summary }),
  };
}

async function readVersion(
  rig: Rig,
  agentId: string,
): Promise<{ readonly seq: Id; readonly value: StoredHook } | undefined> {
  return rig.harness.storage.getValue(bind(hookValue(agentId), {}));
}

async function readHookTx(tx: Tx, agentId: string): Promise<StoredHook> {
  const stored = await tx.value(hookValue(agentId)).get();
  if (stored === undefined) throw new Error(`agent ${agentId} has no hook record`);
  return stored;
}
