/**
 * The hook lifecycle of the hook-persistence document (seed 000): who may make each transition
 * and from which status. Pure functions; the Rig runs them inside one commit, so each transition is an
 * atomic compare-and-set on the commit line.
 *
 *   transition  from       to         who
 *   set         empty      pending    the mayor (the sling dispatcher is a mayor token)
 *   activate    pending    active     the owning agent
 *   touch       active     active     the owning agent (last_activity only)
 *   complete    active     completed  the owning agent
 *   clear       completed  empty      the mayor, after verifying; also from pending or active, to
 *                                     reassign the work (the agent need not be terminated: its old
 *                                     worker's later transitions name a cleared or older attempt)
 */
import { RigError } from "./errors.js";
import type { Actor, HookFile, HookStatus, RigSettings, Transition } from "./types.js";

const FROM: Readonly<Record<Transition, HookStatus>> = {
  set: "empty",
  activate: "pending",
  touch: "active",
  complete: "active",
  clear: "completed",
};

/** The role check (403): the mayor sets and clears; only the owning agent activates, touches, completes. */
export function checkRole(transition: Transition, actor: Actor, agentId: string): void {
  switch (transition) {
    case "set":
    case "clear":
      if (actor.role !== "mayor")
        throw new RigError(
          "rig_forbidden",
          `only the mayor may ${transition} a hook (this token's role is ${actor.role})`,
        );
      return;
    case "activate":
    case "touch":
    case "complete":
      if (actor.role !== "agent")
        throw new RigError(
          "rig_forbidden",
          `only the owning agent may ${transition} its hook (this token's role is ${actor.role})`,
        );
      if (actor.agent !== agentId)
        throw new RigError("rig_forbidden", `agent ${actor.agent} may not ${transition} the hook of agent ${agentId}`);
      return;
    default: {
      const never: never = transition;
      throw new TypeError(`unknown transition ${String(never)}`);
    }
  }
}

/** The status check (409 hook_conflict naming the current status): no skipping, no second hook. */
export function checkStatus(transition: Transition, current: HookStatus): void {
  const from = FROM[transition];
  if (current === from) return;
  // The mayor clears a pending or active hook to reassign its work (seed 000: "or decides to reassign").
  if (transition === "clear" && current !== "empty") return;
  if (transition === "clear")
    throw new RigError("hook_conflict", "cannot clear: the hook is empty, not pending, active or completed");
  const why = transition === "set" ? `; clear it before assigning new work` : "";
  throw new RigError("hook_conflict", `cannot ${transition}: the hook is ${current}, not ${from}${why}`);
}

/**
 * How long after the hook's recorded activity a touch writes nothing (the touch throttle): `touchThrottleMs`,
 * but never more than half the stall threshold. A touch the throttle swallows leaves the recorded activity
 * where it was, so the window must end well before that activity becomes a stall: a touch always writes
 * once the recorded activity is half a threshold old, so right after any touch the agent is never stalled,
 * and an agent touching at least every half threshold is never reported stalled.
 */
export function touchWindow(settings: Pick<RigSettings, "touchThrottleMs" | "stallThresholdMs">): number {
  return Math.min(settings.touchThrottleMs, Math.floor(settings.stallThresholdMs / 2));
}

/** The next hook file after an allowed transition. */
export function nextFile(
  transition: Transition,
  current: HookFile,
  now: string,
  work?: { readonly bead_id: string; readonly title: string },
): HookFile {
  switch (transition) {
    case "set":
      if (work === undefined) throw new TypeError("set needs a work item");
      return {
        agent_id: current.agent_id,
        status: "pending",
        work_item: { bead_id: work.bead_id, title: work.title, assigned_at: now },
        last_activity: now,
      };
    case "activate":
      return { ...current, status: "active", last_activity: now };
    case "touch":
      return { ...current, last_activity: now };
    case "complete":
      return { ...current, status: "completed", last_activity: now };
    case "clear":
      return emptyFile(current.agent_id, now);
    default: {
      const never: never = transition;
      throw new TypeError(`unknown transition ${String(never)}`);
    }
  }
}

export function emptyFile(agentId: string, now: string): HookFile {
  return { agent_id: agentId, status: "empty", work_item: null, last_activity: now };
}

/** The document's `serializeSorted`: keys sorted at every level, two-space indent, final newline. */
export function serializeSorted(value: unknown): string {
  return `${JSON.stringify(sortKeys(value), null, 2)}\n`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
