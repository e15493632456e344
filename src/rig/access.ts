/**
 * Who may do what in the rig (docs/rig.md): the checks every `Rig` method runs on its actor and
 * the agent ids it names. An agent acts only as itself under a valid id (never a reserved name), reads
 * only its own hook and mailbox; the mayor and operators read every agent's; clients have no rig mail.
 */
import { RigError } from "./errors.js";
import { AGENT_ID, MAYOR_ID, RESERVED_NAMES, type Actor, type MailSender } from "./types.js";

export function checkAgentId(agentId: string, field = "agent_id"): void {
  if (!AGENT_ID.test(agentId))
    throw new RigError(
      "rig_invalid",
      `agent ids are 1-64 characters of a-z 0-9 and -, starting with a letter or digit: ${JSON.stringify(agentId)}`,
      field,
    );
  if (RESERVED_NAMES.includes(agentId))
    throw new RigError(
      "rig_invalid",
      `${agentId} is a reserved name (${RESERVED_NAMES.join(", ")}), not an agent id`,
      field,
    );
}

/** An agent actor acts only under a valid agent id: never under a reserved name such as `mayor`. */
export function checkActor(actor: Actor): void {
  if (actor.role !== "agent") return;
  if (!AGENT_ID.test(actor.agent) || RESERVED_NAMES.includes(actor.agent)) {
    throw new RigError(
      "rig_forbidden",
      `an agent token may not act as ${JSON.stringify(actor.agent)}: ${RESERVED_NAMES.join(", ")} are reserved names, not agent ids`,
    );
  }
}

/** The sender role a message records (the witness trusts it, not the `from` name). */
export function senderOf(actor: Actor): MailSender {
  switch (actor.role) {
    case "mayor":
    case "operator":
    case "agent":
      return actor.role;
    case "client":
      throw new RigError("rig_forbidden", "clients do not send rig mail");
    default: {
      const never: never = actor;
      throw new TypeError(`unknown role ${String(never)}`);
    }
  }
}

export function checkReader(actor: Actor, agentId: string): void {
  checkActor(actor);
  checkAgentId(agentId);
  switch (actor.role) {
    case "mayor":
    case "operator":
      return;
    case "agent":
      if (actor.agent !== agentId)
        throw new RigError("rig_forbidden", `agent ${actor.agent} may not read the hook of agent ${agentId}`);
      return;
    case "client":
      throw new RigError("rig_forbidden", "clients do not read hooks");
    default: {
      const never: never = actor;
      throw new TypeError(`unknown role ${String(never)}`);
    }
  }
}

export function ownMailbox(actor: Actor): string {
  checkActor(actor);
  switch (actor.role) {
    case "agent":
      return actor.agent;
    case "mayor":
    case "operator":
      return MAYOR_ID;
    case "client":
      throw new RigError("rig_forbidden", "clients have no rig mailbox");
    default: {
      const never: never = actor;
      throw new TypeError(`unknown role ${String(never)}`);
    }
  }
}

export function checkMailbox(actor: Actor, box: string): void {
  checkActor(actor);
  if (actor.role === "agent" && actor.agent !== box)
    throw new RigError("rig_forbidden", `agent ${actor.agent} may read only its own mailbox`);
  if (actor.role === "client") throw new RigError("rig_forbidden", "clients have no rig mailbox");
}
