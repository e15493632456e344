/**
 * Where the rig keeps its state (docs/rig.md): session values and lists of the core's scoped
 * state (§4.1). Agents and hooks are written by mayor and agent commits; `rig.witness.*` only by the
 * witness; mailboxes are append-only lists (messages are immutable) with acks as separate values. At the
 * end, the few reads and writes of these records that the Rig's operations share (rig.ts,
 * gupp-commits.ts, mail.ts, witness-admin.ts).
 */
import { bind, sessionList, sessionValue, withKey, type ListSpec, type ValueSpec } from "../core/state.js";
import type { Tx } from "../core/tx.js";
import type { Id, JsonValue } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import {
  DEFAULT_SETTINGS,
  type AgentRecord,
  type AgentRole,
  type MailAck,
  type RigSettings,
  type StoredMail,
  type StoredHook,
  type WitnessAgentRecord,
  type WitnessPatrolRecord,
} from "./types.js";

/** One agent in the index: enough for a patrol or a health report without reading the agent record. */
export interface IndexEntry {
  readonly role: AgentRole;
  /** A conversation agent's conversation (nudges go to its watchers). */
  readonly conversationId?: number;
  readonly terminated?: true;
}

/**
 * The old agent index: one value (agent id -> role, conversation, terminated) rewritten on every
 * register and terminate, which hit the 2 MB row cap near 30,000 agents. Nothing reads it any more: the
 * agents are their own rows (`rig.agent`, one per agent, which every rig has always written beside it),
 * enumerated by a keyed scan. A rig that still has it drops it at its next register, terminate or
 * deregister (`dropLegacyIndex`).
 */
export const legacyAgentIndex: ValueSpec<Readonly<Record<string, IndexEntry>>> = sessionValue("rig.agents");

/** agent id -> its record: one row per agent; the rig's agents are a keyed scan of this namespace. */
export const AGENT_NAMESPACE = "rig.agent";
const agentBase = sessionValue<AgentRecord>(AGENT_NAMESPACE);
export function agentValue(agentId: string): ValueSpec<AgentRecord> {
  return withKey(agentBase, agentId);
}

/** A page of the agents scan (the storage's page limit is larger; a patrol reads a thousand rows per page). */
export const AGENT_PAGE = 1000;

/** What scans agent rows: the storage's keyed scan of one namespace. */
export type AgentScanner = Pick<Storage, "scanValues">;

/** Every registered agent's record, in agent id order, a page of rows at a time (O(agents) rows, no index value). */
export async function* scanAgents(storage: AgentScanner, page = AGENT_PAGE): AsyncGenerator<AgentRecord> {
  const scope = bind(agentValue("-"), {}).scope;
  let after: string | undefined;
  for (;;) {
    const { items } = await storage.scanValues({
      scope,
      namespace: AGENT_NAMESPACE,
      ...(after === undefined ? {} : { after }),
      limit: page,
    });
    for (const item of items) yield item.version.value as unknown as AgentRecord;
    const last = items[items.length - 1];
    if (items.length < page || last === undefined) return;
    after = last.key;
  }
}

/** Whether any agent other than `except` is registered (one page of at most two rows). */
export async function otherAgentExists(storage: AgentScanner, except: string): Promise<boolean> {
  const scope = bind(agentValue("-"), {}).scope;
  const { items } = await storage.scanValues({ scope, namespace: AGENT_NAMESPACE, limit: 2 });
  return items.some((item) => item.key !== except);
}

export const HOOK_NAMESPACE = "rig.hook";
const hookBase = sessionValue<StoredHook>(HOOK_NAMESPACE);
export function hookValue(agentId: string): ValueSpec<StoredHook> {
  return withKey(hookBase, agentId);
}

/**
 * agent id -> the last attempt of a deregistered agent of that id: attempts are monotonic per agent id for
 * the life of the rig, so a re-registered agent continues from it (while registered, its hook carries it).
 */
const attemptBase = sessionValue<number>("rig.attempt");
export function retiredAttempt(agentId: string): ValueSpec<number> {
  return withKey(attemptBase, agentId);
}

/** bead id -> the agent holding it while pending or active (one bead, one live hook). */
const beadBase = sessionValue<{ readonly agent_id: string; readonly attempt: number }>("rig.bead");
export function beadValue(beadId: string): ValueSpec<{ readonly agent_id: string; readonly attempt: number }> {
  return withKey(beadBase, beadId);
}

/** conversation id -> the conversation agent it drives. */
const conversationAgentBase = sessionValue<string>("rig.conversation");
export function conversationAgent(conversationId: number): ValueSpec<string> {
  return withKey(conversationAgentBase, String(conversationId));
}

/** Settings the mayor or an operator chose (absent fields keep the defaults). */
export const settingsValue: ValueSpec<Partial<RigSettings>> = sessionValue("rig.witness.settings");

export const WITNESS_NAMESPACE_PREFIX = "rig.witness.";
export const MAIL_NAMESPACE = "rig.mail";
export const MAIL_ACK_NAMESPACE = "rig.mail.ack";

const witnessAgentBase = sessionValue<WitnessAgentRecord>("rig.witness.agent");
export function witnessAgent(agentId: string): ValueSpec<WitnessAgentRecord> {
  return withKey(witnessAgentBase, agentId);
}

export const witnessPatrol: ValueSpec<WitnessPatrolRecord> = sessionValue("rig.witness.patrol");

/** agent id -> the time (ms) of its last mail reply to the witness: recorded by the witness as activity. */
const witnessReplyBase = sessionValue<number>("rig.witness.reply");
export function witnessReply(agentId: string): ValueSpec<number> {
  return withKey(witnessReplyBase, agentId);
}

/** The agent the mayor told the witness to focus on: patrolled on every patrol whatever its role. */
export const witnessFocus: ValueSpec<string> = sessionValue("rig.witness.focus");

/** The witness task's id while one runs. */
export const witnessTask: ValueSpec<number> = sessionValue("rig.witness.task");

/**
 * Why the rig is paused, and since when (ms): set by an import (the copy must not start the work its source runs),
 * cleared by an operator (`POST /v1/sessions/{session}/rig/resume`). While it is set GUPP accepts and completes
 * nothing and the witness patrols nothing; hooks keep their statuses.
 */
export interface RigPause {
  readonly reason: "imported";
  readonly at: number;
}
export const rigPaused: ValueSpec<RigPause> = sessionValue("rig.paused");

/**
 * A mailbox (`mayor`, `witness` or an agent id): messages without their id (the element id is it), with the sender's
 * role.
 */
const mailboxBase = sessionList<StoredMail>(MAIL_NAMESPACE);
export function mailbox(owner: string): ListSpec<StoredMail> {
  return withKey(mailboxBase, owner);
}

const ackBase = sessionValue<MailAck>(MAIL_ACK_NAMESPACE);
export function mailAck(owner: string, id: number): ValueSpec<MailAck> {
  return withKey(ackBase, `${owner}:${id}`);
}

/** A session value as it is now, outside a commit (undefined when absent). */
export async function readValue<T>(storage: Pick<Storage, "getValue">, spec: ValueSpec<T>): Promise<T | undefined> {
  return (await storage.getValue(bind(spec, {})))?.value;
}

/** Set a session value and return the sequence its write gets (the hook's version). */
export function setValue<T>(tx: Tx, spec: ValueSpec<T>, value: T): Id {
  return tx.builder.push({ type: "value.set", addr: bind(spec, {}), value: value as unknown as JsonValue });
}

/** The hook's work item (bead) is no longer held: the next set of that bead may hook it. */
export function releaseBead(tx: Tx, stored: StoredHook): void {
  if (stored.file.work_item !== null) tx.value(beadValue(stored.file.work_item.bead_id)).delete();
}

/** The settings in force, inside a commit: the chosen ones over the defaults. */
export async function settingsTx(tx: Tx): Promise<RigSettings> {
  return { ...DEFAULT_SETTINGS, ...((await tx.value(settingsValue).get()) ?? {}) };
}
