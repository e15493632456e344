/**
 * The witness (seed 002 "Witness observer"; docs/rig.md): a per-rig, read-only patrol that runs
 * as one background task of the session. It sleeps to its next patrol through the runtime's durable
 * sleep (the wake time is in its task state, so the session alarm brings it back after eviction), then
 * runs ONE commit per patrol: classify the polecats' stalls with the document's `classifyStall`, count
 * its nudges, mail escalations to the mayor (de-duplicated per agent, bead and severity) and a health
 * summary when the counts or the stalled set change. Nudges are delivered live after that commit.
 *
 * Read-only: a witness commit writes only its own task, `rig.witness.*` records and its own mail. It
 * never terminates, reassigns, clears or changes an agent's status; it recommends.
 *
 * After downtime the next wake runs one patrol and schedules the following one from now, never a
 * backlog. A patrol interrupted by eviction wrote nothing (one commit), so its rerun writes no
 * duplicate mail or nudge count.
 *
 * One concept over 400 lines: the witness patrol. It holds the stall assessment, the mail a patrol
 * writes and the task kind that runs one patrol per commit.
 */
import type { Call } from "../core/call.js";
import type { ValueSpec } from "../core/state.js";
import { defineTaskKind, type TypedTask } from "../core/task-kind.js";
import type { ConversationTx, Tx } from "../core/tx.js";
import type { TaskRuntime } from "../core/runtime.js";
import { PicoError, TaskCancelled } from "../core/errors.js";
import { iso } from "./hooks.js";
import type { NudgeBus } from "./nudges.js";
import {
  hookValue,
  mailbox,
  scanAgents,
  settingsValue,
  witnessAgent,
  witnessFocus,
  witnessPatrol,
  witnessReply,
  witnessTask,
  rigPaused,
  type AgentScanner,
} from "./state.js";
import {
  AGENT_ID,
  DEFAULT_SETTINGS,
  MAYOR_ID,
  MIN_SETTING_MS,
  WITNESS_ID,
  type MailMessage,
  type MailSender,
  OPERATOR_ID,
  type StoredMail,
  type Nudge,
  type RigHealth,
  type RigSettings,
  type StallSeverity,
  type StoredHook,
  type AgentRecord,
  type WitnessAgentRecord,
  type WitnessPatrolRecord,
} from "./types.js";

export type WitnessState =
  | { readonly status: "scheduled"; readonly next_patrol_at: number }
  | { readonly status: "patrolling"; readonly next_patrol_at: number }
  | { readonly status: "ended"; readonly next_patrol_at: number };

export const WITNESS_KIND = "rig.witness";

const witnessRoles = { scheduled: "start", patrolling: "inflight", ended: "terminal" } as const;
type WitnessTask = TypedTask<WitnessState, typeof witnessRoles>;

/** The document's classification; the alert threshold is the configurable `alertAfterMs` (1 h by default). */
export function classifyStall(
  elapsed: number,
  nudgesSent: number,
  alertAfterMs = DEFAULT_SETTINGS.alertAfterMs,
): StallSeverity {
  if (nudgesSent >= 2) return "critical"; // Nudged twice, still stalled
  if (elapsed > alertAfterMs) return "alert"; // Over 1 hour
  return "warning"; // First detection
}

/** What reads state: a transaction or the storage; and the agents, a keyed scan of their rows. */
export interface StateReader {
  get<T>(spec: ValueSpec<T>): Promise<T | undefined>;
  agents(): AsyncIterable<AgentRecord>;
}

/**
 * A commit's reader. The agents are scanned from the storage: inside a commit on the line nothing else
 * writes in between, and a patrol writes no agent row.
 */
export function txReader(tx: Pick<Tx, "value">, storage: AgentScanner): StateReader {
  return { get: (spec) => tx.value(spec).get(), agents: () => scanAgents(storage) };
}

interface Assessed {
  readonly health: RigHealth;
  /** Per patrolled polecat with an active hook: its stall (if any) and the witness's record. */
  readonly polecats: readonly {
    readonly agentId: string;
    readonly conversationId: number | undefined;
    readonly hook: StoredHook;
    readonly record: WitnessAgentRecord | undefined;
    readonly responded: boolean;
    readonly elapsed: number;
    /** A pending hook past its spawn grace (the agent never started): its threshold is the grace. */
    readonly pending?: true;
  }[];
}

/**
 * Read every agent's hook and classify: the health report (counts exactly as the document names them)
 * and the stalled polecats (with the `focus` agent, whatever its role). A failed read rejects: an agent
 * is never reported idle because its hook could not be read.
 */
export async function assess(
  reader: StateReader,
  now: number,
  rigName: string,
  settings: RigSettings,
  responses: ReadonlyMap<string, number> = new Map(),
  focus: string | undefined = undefined,
): Promise<Assessed> {
  let total = 0;
  let active = 0;
  let idle = 0;
  let pending = 0;
  let terminated = 0;
  const stalledDetails: RigHealth["stalledDetails"] = [];
  const notStarted: { agentId: string; beadId: string; pendingMinutes: number }[] = [];
  const polecats: Assessed["polecats"][number][] = [];
  for await (const entry of reader.agents()) {
    const agentId = entry.agent_id;
    total += 1;
    const hook = await reader.get(hookValue(agentId));
    if (hook === undefined) throw new Error(`agent ${agentId} has no hook record`);
    if (entry.terminated !== undefined) {
      terminated += 1;
      continue;
    }
    const status = hook.file.status;
    if (status === "empty" || status === "completed") {
      idle += 1;
      continue;
    }
    if (status === "pending") {
      pending += 1;
      const since = now - Date.parse(hook.file.work_item?.assigned_at ?? hook.file.last_activity);
      if ((entry.role !== "polecat" && agentId !== focus) || since <= settings.spawnGraceMs) {
        // Assigned and within its grace to start: counted active (the four counts add up to the total).
        active += 1;
        continue;
      }
      const bead = hook.file.work_item?.bead_id ?? "";
      notStarted.push({ agentId, beadId: bead, pendingMinutes: Math.floor(since / 60_000) });
      // Never started after its grace: a stall like any other, chased by the same ladder (nudge, alert,
      // critical after two unanswered nudges). The agent's mail reply since the assignment is its
      // activity (this patrol's or one an earlier patrol recorded, read only when it would matter), so
      // a reply keeps counting until the grace passes again after it.
      const record = await reader.get(witnessAgent(agentId));
      const assigned = now - since;
      let replied = responses.get(agentId) ?? 0;
      if (now - Math.max(assigned, replied) > settings.spawnGraceMs)
        replied = Math.max(replied, (await reader.get(witnessReply(agentId))) ?? 0);
      const answered = replied > assigned ? replied : undefined;
      const responded =
        record !== undefined &&
        (record.bead_id !== bead || (answered !== undefined && answered > record.last_nudge_at));
      const effective = responded ? undefined : record;
      const elapsed = answered === undefined ? since : now - answered;
      polecats.push({
        agentId,
        conversationId: entry.conversationId,
        hook,
        record: effective,
        responded,
        elapsed,
        pending: true,
      });
      if (elapsed > settings.spawnGraceMs) {
        stalledDetails.push({
          agentId,
          beadId: bead,
          stalledMinutes: Math.floor(since / 60_000),
          nudgesSent: effective?.nudges ?? 0,
        });
      } else active += 1;
      continue;
    }
    if (entry.role !== "polecat" && agentId !== focus) {
      active += 1;
      continue;
    }
    const record = await reader.get(witnessAgent(agentId));
    const bead = hook.file.work_item?.bead_id ?? "";
    // Activity: the hook's last_activity or the agent's last mail reply to the witness (seed 002: "the
    // witness records the response as activity"), this patrol's or one an earlier patrol recorded. The
    // recorded reply is read only when the hook alone would be a stall.
    let activity = Math.max(Date.parse(hook.file.last_activity), responses.get(agentId) ?? 0);
    if (now - activity > settings.stallThresholdMs)
      activity = Math.max(activity, (await reader.get(witnessReply(agentId))) ?? 0);
    const responded = record !== undefined && (record.bead_id !== bead || activity > record.last_nudge_at);
    const effective = responded ? undefined : record;
    const elapsed = now - activity;
    polecats.push({ agentId, conversationId: entry.conversationId, hook, record: effective, responded, elapsed });
    if (elapsed > settings.stallThresholdMs) {
      stalledDetails.push({
        agentId,
        beadId: bead,
        stalledMinutes: Math.floor(elapsed / 60_000),
        nudgesSent: effective?.nudges ?? 0,
      });
    } else {
      active += 1;
    }
  }
  const health: RigHealth = {
    rigName,
    timestamp: iso(now),
    totalAgents: total,
    activeAgents: active,
    stalledAgents: stalledDetails.length,
    idleAgents: idle,
    terminatedAgents: terminated,
    stalledDetails,
    pendingAgents: pending,
    notStartedAgents: notStarted,
  };
  return { health, polecats };
}

/** What one patrol did (for the caller's live delivery and for tests). */
export interface PatrolOutcome {
  readonly nudges: readonly { readonly nudge: Nudge; readonly conversationId: number | undefined }[];
  readonly mail: readonly Omit<MailMessage, "id">[];
  readonly health: RigHealth;
  readonly nextPatrolAt: number;
}

/**
 * The agents' replies in the witness's mailbox that no patrol has read yet (after its mail cursor): what
 * a read-only health report adds to the replies the witness recorded.
 */
export async function unreadReplies(
  reader: Pick<StateReader, "get">,
  readList: (after: number) => Promise<readonly { readonly id: number; readonly value: StoredMail }[]>,
): Promise<Map<string, number>> {
  const cursor = (await reader.get(witnessPatrol))?.mail_cursor ?? 0;
  const replies = new Map<string, number>();
  for (const element of await readList(cursor)) {
    if (senderRole(element.value) !== "agent") continue;
    replies.set(
      element.value.from,
      Math.max(replies.get(element.value.from) ?? 0, Date.parse(element.value.timestamp)),
    );
  }
  return replies;
}

export async function readSettings(reader: Pick<StateReader, "get">): Promise<RigSettings> {
  return { ...DEFAULT_SETTINGS, ...((await reader.get(settingsValue)) ?? {}) };
}

/** One patrol inside one commit: reads, classification and the witness's own writes. */
export async function patrol(
  tx: Pick<Tx, "value" | "list"> | Pick<ConversationTx, "value" | "list">,
  now: number,
  rigName: string,
  storage: AgentScanner,
): Promise<PatrolOutcome> {
  const reader = txReader(tx, storage);
  const record: WitnessPatrolRecord = (await reader.get(witnessPatrol)) ?? {
    last_patrol_at: 0,
    patrols: 0,
    health_key: "",
    mail_cursor: 0,
  };
  // The witness's mail: the mayor's instructions, the polecats' replies to nudges.
  let settings = await readSettings(reader);
  const responses = new Map<string, number>();
  let cursor = record.mail_cursor;
  const inbox = await tx.list(mailbox(WITNESS_ID)).read({ after: cursor, limit: 1000 });
  let changed: Partial<RigSettings> | undefined;
  let focus = await reader.get(witnessFocus);
  let focusChanged = false;
  for (const element of inbox.items) {
    cursor = element.id;
    const message = element.value;
    const role = senderRole(message);
    if (role === "mayor" || role === "operator") {
      const set = instruction(message.payload);
      if (set !== undefined) changed = { ...(changed ?? {}), ...set };
      const focused = focusInstruction(message.payload);
      if (focused !== undefined) {
        focus = focused ?? undefined;
        focusChanged = true;
      }
    } else if (role === "agent") {
      responses.set(message.from, Math.max(responses.get(message.from) ?? 0, Date.parse(message.timestamp)));
    }
  }
  if (changed !== undefined) {
    const stored = (await reader.get(settingsValue)) ?? {};
    tx.value(settingsValue).set({ ...stored, ...changed });
    settings = { ...settings, ...changed };
  }
  if (focusChanged) {
    if (focus === undefined) tx.value(witnessFocus).delete();
    else tx.value(witnessFocus).set(focus);
  }
  // The replies are recorded as the agents' activity (the witness's own records), so a reply keeps
  // counting after this patrol, until the agent's next activity or reply.
  for (const [agentId, at] of responses) tx.value(witnessReply(agentId)).set(at);
  const { health, polecats } = await assess(reader, now, rigName, settings, responses, focus);
  const nudges: { nudge: Nudge; conversationId: number | undefined }[] = [];
  const mail: Omit<MailMessage, "id">[] = [];
  const timestamp = iso(now);
  for (const p of polecats) {
    const bead = p.hook.file.work_item?.bead_id ?? "";
    const threshold = p.pending === true ? settings.spawnGraceMs : settings.stallThresholdMs;
    if (p.elapsed <= threshold) {
      if (p.responded || p.record !== undefined) tx.value(witnessAgent(p.agentId)).delete();
      continue;
    }
    // The ladder (seed 002): every patrol that finds the stall unanswered nudges, until two nudges went
    // unanswered (critical); an alert (over `alertAfterMs`) is mailed once and nudges too, so an agent
    // found stalled after downtime is still nudged twice before `critical`. Each nudge is recorded in
    // this commit (the seed's nudge file: count and time per agent and bead), and only recorded nudges
    // count towards `critical`.
    const nudgesSent = p.record?.nudges ?? 0;
    const severity = classifyStall(p.elapsed, nudgesSent, settings.alertAfterMs);
    const minutes = Math.floor(p.elapsed / 60_000);
    let escalated = p.record?.escalated ?? [];
    if (severity !== "warning" && !escalated.includes(severity)) {
      const message: Omit<MailMessage, "id"> = {
        from: WITNESS_ID,
        to: MAYOR_ID,
        channel: "mail",
        payload:
          p.pending === true
            ? `STALL_${severity.toUpperCase()}: ${p.agentId} has not started ${bead} after ${minutes}m`
            : `STALL_${severity.toUpperCase()}: ${p.agentId} idle ${minutes}m on ${bead}`,
        timestamp,
        durable: true,
      };
      tx.list(mailbox(MAYOR_ID)).append({ ...message, sender: "witness" });
      mail.push(message);
      escalated = [...escalated, severity];
    }
    if (severity === "critical") {
      // The mayor decides now; no further nudges for this stall.
      if (escalated !== p.record?.escalated || p.responded)
        tx.value(witnessAgent(p.agentId)).set({
          bead_id: bead,
          nudges: nudgesSent,
          last_nudge_at: p.record?.last_nudge_at ?? now,
          escalated,
        });
      continue;
    }
    nudges.push({
      nudge: {
        from: WITNESS_ID,
        to: p.agentId,
        channel: "nudge",
        payload:
          p.pending === true
            ? `HEALTH_CHECK: ${bead} not started after ${minutes}m`
            : `HEALTH_CHECK: no activity for ${minutes}m on ${bead}`,
        timestamp,
        durable: false,
      },
      conversationId: p.conversationId,
    });
    tx.value(witnessAgent(p.agentId)).set({ bead_id: bead, nudges: nudgesSent + 1, last_nudge_at: now, escalated });
  }
  const key = healthKey(health);
  if (key !== record.health_key) {
    const summary: Omit<MailMessage, "id"> = {
      from: WITNESS_ID,
      to: MAYOR_ID,
      channel: "mail",
      payload: `HEALTH: ${health.totalAgents} agents, ${health.activeAgents} active, ${health.stalledAgents} stalled${health.stalledAgents > 0 ? ` (${health.stalledDetails.map((d) => d.agentId).join(", ")})` : ""}, ${health.idleAgents} idle, ${health.terminatedAgents} terminated`,
      timestamp,
      durable: true,
    };
    tx.list(mailbox(MAYOR_ID)).append({ ...summary, sender: "witness" });
    mail.push(summary);
  }
  const nextPatrolAt = now + settings.patrolIntervalMs;
  tx.value(witnessPatrol).set({
    last_patrol_at: now,
    patrols: record.patrols + 1,
    health_key: key,
    mail_cursor: cursor,
  });
  return { nudges, mail, health, nextPatrolAt };
}

/**
 * The role a message was sent with: the sender's token role as recorded beside the message. Rows of
 * earlier versions recorded none; for them the name is all there is (reserved names were not yet refused).
 */
export function senderRole(message: StoredMail): MailSender {
  if (message.sender !== undefined) return message.sender;
  if (message.from === MAYOR_ID) return "mayor";
  if (message.from === OPERATOR_ID) return "operator";
  if (message.from === WITNESS_ID) return "witness";
  return "agent";
}

/** Counts and the stalled set: timestamps and minutes alone are no change. */
function healthKey(health: RigHealth): string {
  return JSON.stringify([
    health.totalAgents,
    health.activeAgents,
    health.stalledAgents,
    health.idleAgents,
    health.terminatedAgents,
    health.stalledDetails.map((d) => d.agentId).sort(),
  ]);
}

const SETTING_KEYS = [
  "patrolIntervalMs",
  "stallThresholdMs",
  "alertAfterMs",
  "spawnGraceMs",
  "touchThrottleMs",
] as const;

/** A mayor's `{ "set": { stallThresholdMs: ... } }` instruction; anything else is ignored. */
function instruction(payload: MailMessage["payload"]): Partial<RigSettings> | undefined {
  if (typeof payload !== "object" || payload === null) return undefined;
  const set = (payload as Record<string, unknown>)["set"];
  if (set === null || typeof set !== "object" || Array.isArray(set)) return undefined;
  const out: Partial<Record<(typeof SETTING_KEYS)[number], number>> = {};
  for (const key of SETTING_KEYS) {
    const value = (set as Record<string, unknown>)[key];
    if (typeof value === "number" && Number.isSafeInteger(value) && value >= MIN_SETTING_MS) out[key] = value;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/**
 * A mayor's `{ "focus": "polecat-alpha" }` instruction (seed 002: "focus on specific agent"): that agent
 * is patrolled on every patrol whatever its role; `{ "focus": null }` ends it. Returns the agent, null
 * to end the focus, or undefined when the payload is no focus instruction (or names no valid agent id).
 */
function focusInstruction(payload: MailMessage["payload"]): string | null | undefined {
  if (typeof payload !== "object" || payload === null || !("focus" in payload)) return undefined;
  const focus = (payload as Record<string, unknown>)["focus"];
  if (focus === null) return null;
  return typeof focus === "string" && AGENT_ID.test(focus) ? focus : undefined;
}

/**
 * What a patrol needs of the session's rig: its name, the storage it scans for agents and the bus its
 * nudges go out on. The `Rig` (rig.ts) is one; it imports this file, so the witness names no `Rig`.
 */
export interface PatrolledRig {
  readonly name: string;
  readonly harness: { readonly storage: AgentScanner };
  readonly nudges: Pick<NudgeBus, "send">;
}

/**
 * The witness task kind. `rigOf` resolves the session's Rig once it exists (the kind is registered when
 * the harness opens, before the Rig is built over it).
 */
export function createWitnessKind(
  rigOf: () => PatrolledRig | undefined,
  report: (error: unknown) => void = () => undefined,
) {
  const read = (runtime: TaskRuntime, call: Call): Pick<StateReader, "get"> => ({
    get: async (spec) => await runtime.value(spec).get(call),
  });
  /**
   * The next patrol under the current settings: never later than one (possibly new, shorter) interval
   * after the last patrol or, when a settings change interrupted the sleep, after now.
   */
  const replan = async (planned: number, runtime: TaskRuntime, call: Call, interrupted: boolean): Promise<number> => {
    const reader = read(runtime, call);
    const interval = (await readSettings(reader)).patrolIntervalMs;
    const now = runtime.now();
    const last = (await reader.get(witnessPatrol))?.last_patrol_at ?? 0;
    let next = planned;
    if (last > 0) next = Math.min(next, Math.max(now, last + interval));
    if (interrupted) next = Math.min(next, now + interval);
    return next;
  };
  const loop = async (task: WitnessTask, runtime: TaskRuntime, call: Call): Promise<void> => {
    // A settings change made while the object was down applies from the start.
    let next = await replan(task.state.next_patrol_at, runtime, call, false);
    for (;;) {
      await runtime.sleep(next, call);
      if (runtime.now() < next) {
        // Interrupted by a settings commit (a new patrol interval): re-plan in the witness's own commit,
        // so the durable wake time and the alarm move with it (the host never patches this task, §6.1).
        const planned = await replan(next, runtime, call, true);
        if (planned < next) {
          await runtime.commit((tx) => tx.patch(task, "patrolling", { next_patrol_at: planned }), call);
          next = planned;
        }
        continue;
      }
      const rig = rigOf();
      if (rig === undefined) throw new PicoError("contract", "the witness runs only in a session with a rig");
      const now = runtime.now();
      try {
        const outcome = await runtime.commit(async (tx) => {
          // One witness per rig by construction: the registered witness is durable state, checked in the
          // patrol's own commit. A witness that is no longer the registered one (deregistered with a kill
          // before its abort, or replaced) ends itself here and patrols nothing.
          if ((await tx.value(witnessTask).get()) !== task.id) {
            tx.settle(task, "ended", { next_patrol_at: next });
            return undefined;
          }
          // A paused rig (an imported copy) is not patrolled: the witness sleeps on until an operator resumes it.
          if ((await tx.value(rigPaused).get()) !== undefined) {
            const nextPatrolAt = now + (await readSettings({ get: (spec) => tx.value(spec).get() })).patrolIntervalMs;
            tx.patch(task, "patrolling", { next_patrol_at: nextPatrolAt });
            return { nudges: [], nextPatrolAt };
          }
          const result = await patrol(tx, now, rig.name, rig.harness.storage);
          tx.patch(task, "patrolling", { next_patrol_at: result.nextPatrolAt });
          return result;
        }, call);
        if (outcome === undefined) return;
        for (const { nudge, conversationId } of outcome.nudges) rig.nudges.send(nudge, conversationId);
        next = outcome.nextPatrolAt;
      } catch (error) {
        if (error instanceof TaskCancelled || call.abortSignal?.aborted === true) throw error;
        // A failed read is not "no work": nothing was written; report and try again next interval.
        report(error);
        next = now + (await readSettings(read(runtime, call))).patrolIntervalMs;
      }
    }
  };
  const kind = defineTaskKind<WitnessState>()({
    kind: WITNESS_KIND,
    roles: witnessRoles,
    initialStatus: "scheduled",
    // Both methods sleep to the next patrol first: an invocation started before that time is parked from
    // its dispatch (not busy, and no kill is counted while it sleeps).
    sleepsUntil: (state) => (state.status === "ended" ? undefined : state.next_patrol_at),
    execute: (task, runtime, call) => loop(task, runtime, call),
    recover: (task, runtime, call) => loop(task, runtime, call),
    abort: async (task, runtime, call) => {
      await runtime.commit((tx) => tx.settle(task, "ended", { next_patrol_at: task.state.next_patrol_at }), call);
    },
  });
  return kind;
}

export type WitnessKind = ReturnType<typeof createWitnessKind>;
