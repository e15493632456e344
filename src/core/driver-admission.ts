/**
 * Admission (§6.3, §6.4, §6.5): what the commit line asks the driver before a batch is built and before
 * it is persisted. A commit is admitted by lifecycle phase, by the exact identity of the invocation its
 * Call carries (a stale or settled invocation has no authority left) and by the durable abort mark; the
 * whole batch is then checked for writes only the owning invocation may make, for what an abort handler
 * may not create, and for new wait cycles. Abort marks (§6.3) are pushed here too, as writes the driver
 * itself built.
 */
import type { Id, MainWrite } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError, TaskCancelled } from "./errors.js";
import { INBOX_NAMESPACE } from "./inbox.js";
import type { CommitOrigin } from "./session-types.js";
import type { TxBuilder } from "./tx-builder.js";
import { invocationKey, type Invocation } from "./driver-types.js";
import type { DriverState } from "./driver-state.js";
import { checkNewWaitCycles } from "./driver-waiters.js";

/** The committing invocation's origin, if the call carries one. */
export function originOf(s: DriverState, call: Call): CommitOrigin | undefined {
  const inv = call.value(invocationKey);
  if (inv === undefined) return undefined;
  const lt = s.live.get(inv.taskId);
  return { taskId: inv.taskId, turn: (lt?.task.turn ?? inv.kind.turn) === true };
}

/** Whether `inv` is still its task's running invocation (a runtime acts only while it is, §6.5). */
export function isCurrent(s: DriverState, inv: Invocation): boolean {
  return s.running.get(inv.taskId) === inv;
}

/** Admission (§6.3, §6.4): phase, exact invocation identity and the durable mark, before the builder runs. */
export function admit(s: DriverState, call: Call, internal: boolean, scratchTask: Id | undefined, mark = false): void {
  if (s.phase === "faulted") throw new PicoError("faulted", `the session faulted: ${s.fault?.message ?? "unknown"}`);
  if (s.phase === "closing" || s.phase === "closed") throw new PicoError("closed", "the session is closing");
  if (internal) return;
  const inv = call.value(invocationKey);
  if (inv === undefined) {
    // Host cancellation stays allowed while stopping; every other host write is refused.
    if (s.phase === "stopping" && !mark)
      throw new PicoError("closed", "the session is shutting down; only abort cleanup may commit");
    if (scratchTask !== undefined)
      throw new PicoError("contract", `scratch of task ${scratchTask} is written only by its running invocation`);
    return;
  }
  if (s.running.get(inv.taskId) !== inv) {
    throw new PicoError("contract", `a stale ${inv.method} invocation of task ${inv.taskId} tried to commit`);
  }
  if (scratchTask !== undefined && scratchTask !== inv.taskId) {
    throw new PicoError("contract", `task ${inv.taskId} tried to write task ${scratchTask}'s scratch`);
  }
  const lt = s.live.get(inv.taskId);
  // §6.1: authority ends at settlement. The invocation keeps its slot until it returns, but once its
  // task left the live map it may not write again (neither main nor scratch).
  if (lt === undefined) {
    throw new PicoError(
      "contract",
      `task ${inv.taskId} has settled; its ${inv.method} invocation has no write authority left (§6.1)`,
    );
  }
  if (inv.method !== "abort") {
    if (lt.task.abort === true || s.phase === "stopping") throw new TaskCancelled(inv.taskId);
  }
}

/** Whole-batch authority checks before persistence. */
export function validate(s: DriverState, writes: readonly MainWrite[], call: Call, internal: boolean): void {
  if (internal) return;
  const inv = call.value(invocationKey);
  for (const write of writes) {
    // §6.4: while stopping a host may still mark for abort, and nothing else; a commit that carries marks
    // alongside other writes (fork({ abort: true }) creates a conversation) is refused whole.
    if (s.phase === "stopping" && inv === undefined && !s.internal.has(write)) {
      throw new PicoError("closed", "the session is shutting down; only abort cleanup may commit");
    }
    switch (write.type) {
      case "patch":
      case "settle": {
        if (s.internal.has(write)) break;
        const owner = s.running.get(write.id);
        if (owner !== undefined && owner !== inv) {
          throw new PicoError(
            "contract",
            `task ${write.id} is owned by its running ${owner.method} invocation; only it may change its state (abort marks remain allowed)`,
          );
        }
        break;
      }
      case "task":
      case "createConversation":
        if (inv?.method === "abort") {
          throw new PicoError(
            "contract",
            `task ${inv.taskId}'s abort handler cannot create tasks or conversations (§6.3)`,
          );
        }
        if (write.type === "task") checkNewWaitCycles(s, write.task);
        break;
      case "list.append":
        // §6.3: nor can it queue future work via accept/nextRun (steer, followUp, nextRun are inbox
        // elements). A queued write is a record, not work: it lands at the next boundary and starts no
        // turn, so cleanup may report what happened (a job's killed notice into a busy conversation).
        if (inv?.method === "abort" && write.addr.namespace === INBOX_NAMESPACE && !isQueuedWrite(write.value)) {
          throw new PicoError("contract", `task ${inv.taskId}'s abort handler cannot queue input (§6.3)`);
        }
        break;
      default:
        break;
    }
  }
}

/** Admission of a registry change (§9.6): like a commit's, by lifecycle and invocation identity. */
export function admitChange(s: DriverState, call: Call): void {
  s.admitLifecycle();
  if (s.phase === "closing" || s.phase === "closed") throw new PicoError("closed", "the session is closing");
  const inv = call.value(invocationKey);
  if (inv !== undefined && s.running.get(inv.taskId) !== inv) {
    throw new PicoError(
      "contract",
      `a stale ${inv.method} invocation of task ${inv.taskId} tried to change a registry`,
    );
  }
}

/** Push abort marks into a batch being built on the line (one commit with other writes, §6.3). */
export function markWrites(s: DriverState, b: TxBuilder, ids: readonly Id[], options: { ifLive?: boolean } = {}): Id[] {
  const marked: Id[] = [];
  for (const id of ids) {
    const lt = s.live.get(id);
    if (lt === undefined) {
      if (options.ifLive) continue;
      throw new PicoError("invalid_commit", `task ${id} is not live; only live tasks can be marked for abort`);
    }
    if (lt.task.abort === true || marked.includes(id)) continue;
    const write: MainWrite = { type: "patch", id, role: lt.task.role, state: lt.task.state, abort: true };
    s.internal.add(write);
    b.push(write);
    marked.push(id);
  }
  return marked;
}

/** Whether an inbox element is a queued write (mode "write"), the one kind of queued input cleanup may add. */
function isQueuedWrite(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as { mode?: unknown }).mode === "write";
}
