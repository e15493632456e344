/**
 * Where the rig keeps its state (issue 13, DESIGN §8): session values and lists of the core's scoped
 * state (§4.1). Agents and hooks are written by mayor and agent commits; `rig.witness.*` only by the
 * witness; mailboxes are append-only lists (messages are immutable) with acks as separate values.
 */
import { sessionList, sessionValue, withKey, type ListSpec, type ValueSpec } from "../core/state.js";
import type { AgentRecord, AgentRole, MailAck, RigSettings, StoredMail, StoredHook, WitnessAgentRecord, WitnessPatrolRecord } from "./types.js";

/** One agent in the index: enough for a patrol or a health report without reading the agent record. */
export interface IndexEntry {
  readonly role: AgentRole;
  /** A conversation agent's conversation (nudges go to its watchers). */
  readonly conversationId?: number;
  readonly terminated?: true;
}

/** agent id -> role (and terminated), for listing, patrol and health without reading every agent record. */
export const agentIndex: ValueSpec<Readonly<Record<string, IndexEntry>>> = sessionValue("rig.agents");

const agentBase = sessionValue<AgentRecord>("rig.agent");
export function agentValue(agentId: string): ValueSpec<AgentRecord> {
  return withKey(agentBase, agentId);
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

/** A mailbox (`mayor`, `witness` or an agent id): messages without their id (the element id is it), with the sender's role. */
const mailboxBase = sessionList<StoredMail>(MAIL_NAMESPACE);
export function mailbox(owner: string): ListSpec<StoredMail> {
  return withKey(mailboxBase, owner);
}

const ackBase = sessionValue<MailAck>(MAIL_ACK_NAMESPACE);
export function mailAck(owner: string, id: number): ValueSpec<MailAck> {
  return withKey(ackBase, `${owner}:${id}`);
}
