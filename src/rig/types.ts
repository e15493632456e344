/**
 * The rig's records (seeds 000 "Hook persistence" and 002 "Witness observer"; docs/rig.md): the
 * hook file exactly as the hook-persistence document writes it (snake_case, ISO 8601 UTC), what the rig
 * keeps beside it (attempt, summary), agents, mail, the witness's settings and its health report with
 * the names and types of the witness document's `RigHealthReport`.
 */

/** The document's hook lifecycle: empty -> pending -> active -> completed -> empty. */
export type HookStatus = "empty" | "pending" | "active" | "completed";

export interface WorkItem {
  readonly bead_id: string;
  readonly title: string;
  readonly assigned_at: string;
}

/** `.chipset/state/hooks/{agent_id}.json`: exactly the document's fields. */
export interface HookFile {
  readonly agent_id: string;
  readonly status: HookStatus;
  readonly work_item: WorkItem | null;
  readonly last_activity: string;
}

/** The hook as session state: the file plus what the rig keeps beside it (not in the file). */
export interface StoredHook {
  readonly file: HookFile;
  /** The assignment's number: 0 before the first, +1 on every set. */
  readonly attempt: number;
  /** The agent's summary given with `complete`. */
  readonly summary?: string;
  /** GUPP (conversation agents): the input the work item was accepted as; its final answer completes the hook. */
  readonly input?: { readonly conversationId: number; readonly inputId: number };
}

/** A hook as callers see it: the record, its stored version (the ETag) and the attempt. */
export interface HookView {
  readonly hook: HookFile;
  /** The sequence of the hook's last durable write: changes on every write. */
  readonly version: number;
  readonly attempt: number;
  readonly summary?: string;
  /**
   * The witness's record of nudges for the current bead (the seed's nudge file): how many and the last
   * one's time. Nudges themselves are live only, so an agent that was not listening learns it was nudged
   * here at its next poll. Absent when the witness has not nudged it for this bead.
   */
  readonly nudges?: { readonly count: number; readonly lastAt: string };
}

/** The document's agent roles; only polecats are patrolled. */
export type AgentRole = "polecat" | "refinery" | "crew";

export interface AgentRecord {
  readonly agent_id: string;
  readonly role: AgentRole;
  /** Conversation agents are driven by the harness; external agents talk HTTP with an agent token. */
  readonly conversationId?: number;
  readonly registered_at: string;
  readonly registered_by: string;
  readonly terminated?: { readonly by: string; readonly at: string };
}

/** Who is asking: the token's role and, for agent tokens, its agent id. */
export type Actor =
  | { readonly role: "mayor" }
  | { readonly role: "operator" }
  | { readonly role: "client" }
  | { readonly role: "agent"; readonly agent: string };

export function actorName(actor: Actor): string {
  switch (actor.role) {
    case "agent":
      return actor.agent;
    case "mayor":
    case "operator":
    case "client":
      return actor.role;
    default: {
      const never: never = actor;
      return never;
    }
  }
}

/** The hook transitions of the document, plus the agent's activity touch. */
export type Transition = "set" | "activate" | "touch" | "complete" | "clear";

/** A durable message (the witness document's AgentMessage with channel "mail"). */
export interface MailMessage {
  readonly id: number;
  readonly from: string;
  readonly to: string;
  readonly channel: "mail";
  readonly payload: MailPayload;
  readonly timestamp: string;
  readonly durable: true;
}

/**
 * Who sent a message, by the sender token's role (the witness for its own mail): kept beside the stored
 * message, never a part of its file. The witness trusts this role, not the `from` name.
 */
export type MailSender = "mayor" | "operator" | "agent" | "witness";

/**
 * A message as a mailbox list stores it: without its id (the element id is it), with its sender's role (absent in rows
 * of earlier versions).
 */
export type StoredMail = Omit<MailMessage, "id"> & { readonly sender?: MailSender };

export type MailPayload = string | { readonly [key: string]: MailPayloadValue };
export type MailPayloadValue =
  string | number | boolean | null | readonly MailPayloadValue[] | { readonly [key: string]: MailPayloadValue };

export interface MailAck {
  readonly by: string;
  readonly at: string;
}

/** A non-durable nudge (channel "nudge", durable false): delivered live or lost. */
export interface Nudge {
  readonly from: string;
  readonly to: string;
  readonly channel: "nudge";
  readonly payload: string;
  readonly timestamp: string;
  readonly durable: false;
}

/** The witness's settings (defaults from the witness document) and the touch throttle. */
export interface RigSettings {
  readonly patrolIntervalMs: number;
  readonly stallThresholdMs: number;
  readonly alertAfterMs: number;
  readonly spawnGraceMs: number;
  readonly touchThrottleMs: number;
}

export const DEFAULT_SETTINGS: RigSettings = {
  patrolIntervalMs: 5 * 60_000,
  stallThresholdMs: 30 * 60_000,
  alertAfterMs: 60 * 60_000,
  spawnGraceMs: 5 * 60_000,
  touchThrottleMs: 30_000,
};

/** The shortest setting the mayor may choose (a demo runs the whole ladder in seconds). */
export const MIN_SETTING_MS = 1_000;

export type StallSeverity = "warning" | "alert" | "critical";

/** The witness document's report, fields, names and types exactly; extras sit beside them. */
export interface RigHealthReport {
  rigName: string;
  timestamp: string;
  totalAgents: number;
  activeAgents: number;
  stalledAgents: number;
  idleAgents: number;
  terminatedAgents: number;
  stalledDetails: Array<{
    agentId: string;
    beadId: string;
    stalledMinutes: number;
    nudgesSent: number;
  }>;
}

export interface RigHealth extends RigHealthReport {
  readonly pendingAgents: number;
  readonly notStartedAgents: readonly {
    readonly agentId: string;
    readonly beadId: string;
    readonly pendingMinutes: number;
  }[];
}

/** The witness's own record per agent: nudges sent for the current stall and escalations mailed. */
export interface WitnessAgentRecord {
  readonly bead_id: string;
  readonly nudges: number;
  readonly last_nudge_at: number;
  /** `${severity}` already mailed for this bead (de-duplication per agent, bead and severity). */
  readonly escalated: readonly StallSeverity[];
}

/** The witness's patrol record. */
export interface WitnessPatrolRecord {
  readonly last_patrol_at: number;
  readonly patrols: number;
  /** The counts and stalled set of the last health summary mailed (timestamps and minutes excluded). */
  readonly health_key: string;
  /** The last witness mail element read. */
  readonly mail_cursor: number;
}

/** Agent ids (the hook document's `agent_id`): 1-64 characters of a-z 0-9 and -, starting with a letter or digit. */
export const AGENT_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

export const WITNESS_ID = "witness";
export const MAYOR_ID = "mayor";
export const OPERATOR_ID = "operator";

/** Names of the rig's roles, never agent ids: an agent named `mayor` would read the mayor's mail. */
export const RESERVED_NAMES: readonly string[] = [MAYOR_ID, WITNESS_ID, OPERATOR_ID];
