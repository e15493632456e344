/**
 * GET .../inspect (SessionObject.inspect): the harness's inspection with what the session host knows beside it
 * (quarantined tasks, the fault record, kill counters and their bound, the deployed version); and the counters the
 * session sends its directory for GET /v1/stats.
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { SessionInspection } from "../../api/responses.js";
import type { Task } from "../../storage/records.js";
import { bind } from "../../core/state.js";
import { pendingAll } from "../../kinds/pending-types.js";
import type { SessionCounters } from "../directory/object.js";
import type { OpenSession } from "./opening.js";

export async function inspectSession(session: OpenSession, version: string): Promise<SessionInspection> {
  const result = await session.harness.inspect(BACKGROUND_CONTEXT);
  // The driver knows the tasks it withheld in this instance; the book also knows those whose count
  // reached the bound under this version but were not tried yet since the object started.
  const counted = new Set(session.book.quarantined(version));
  for (const task of result.quarantined) counted.add(task.id);
  const quarantined = [...result.start, ...result.inflight].filter((task: Task) => counted.has(task.id));
  return {
    ...result,
    quarantined,
    fault: session.book.fault(),
    kills: session.book.kills(),
    killBound: session.book.bound,
    version,
    busy: session.harness.driver.busy,
    nextWake: session.harness.driver.nextWake,
  };
}

/** What the session counts of itself for GET /v1/stats (sent with its directory row); `outbox`: its book's counts. */
export async function sessionCounters(
  session: OpenSession,
  version: string,
  outbox: { readonly backlog: number; readonly dead: number },
): Promise<SessionCounters> {
  const quarantined = session.book
    .quarantined(version)
    .filter((id) => session.harness.driver.liveTask(id) !== undefined);
  const pending = (await session.harness.storage.getValue(bind(pendingAll, {})))?.value ?? [];
  const deadlines = pending.flatMap((item) => (item.deadline === undefined ? [] : [item.deadline]));
  return {
    quarantinedTasks: quarantined.length,
    outboxBacklog: outbox.backlog,
    deadDeliveries: outbox.dead,
    pendingItems: pending.length,
    pendingDeadline: deadlines.length === 0 ? null : Math.min(...deadlines),
  };
}
