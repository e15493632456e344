/**
 * GET .../inspect (SessionObject.inspect): the harness's inspection with what the session host knows beside it
 * (quarantined tasks, the fault record, kill counters and their bound, the deployed version).
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { SessionInspection } from "../../api/responses.js";
import type { Task } from "../../storage/records.js";
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
