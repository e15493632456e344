/**
 * Why a task was aborted, when the host marked it for a reason of its own (docs/operations.md "Export and
 * import"): an import marks every live task of the imported session for abort, and each of those tasks
 * says so (`abortReason: "imported"` on GET .../tasks, a conversation's snapshot, POST .../tasks/{id}/abort).
 *
 * The core's durable abort mark (`Task.abort`, §6.3) is a bare flag: pico records no reason for it, and an
 * operator's or a user's abort needs none (the request says who asked). A host reason is one session value
 * per task (`edge.task.abort_reason`, keyed by the task id), written in the same commit as the mark, so it is
 * part of the session's history (an export carries it) and is never written for a task the host did not mark.
 * Reading it costs one point read per marked task shown; unmarked tasks are never looked up.
 * Used by session/transfer.ts (writes) and session/api.ts (presents).
 */
import { bind, sessionValue, withKey } from "../../core/state.js";
import type { AbortReason, ShownTask } from "../../api/responses.js";
import type { Id, Task, Value } from "../../storage/records.js";
import type { Storage } from "../../storage/storage.js";

export type { AbortReason, ShownTask };

const reasonBase = sessionValue<AbortReason>("edge.task.abort_reason");

/** The value holding task `id`'s abort reason. */
export function abortReasonValue(id: Id): Value<AbortReason> {
  return bind(withKey(reasonBase, String(id)), {});
}

/**
 * `tasks` with their abort reasons: a task marked for abort (`abort: true`) for a host reason gets
 * `abortReason`; every other task is returned as it is (the same object). A failed read throws (an outage,
 * never "no reason"); the stored value is trusted (§7.3: only this module's writer sets it).
 */
export async function withAbortReasons(storage: Storage, tasks: readonly Task[]): Promise<ShownTask[]> {
  return Promise.all(
    tasks.map(async (task): Promise<ShownTask> => {
      if (task.abort !== true) return task;
      const stored = (await storage.getValue(abortReasonValue(task.id)))?.value;
      return stored === undefined ? task : { ...task, abortReason: stored };
    }),
  );
}
