/**
 * A session object's delete (SessionObject.destroy, eraseFor and retention's expiry), run on its lifecycle queue:
 * close the harness, end watchers, hand the unreported usage to the limits, delete every row and the alarm, then send
 * the directory its tombstone. The object hands over the parts it holds; this module only sequences them.
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { ErasedOwner } from "../directory/erasures.js";
import type { Env } from "../env.js";
import { SessionNotFound } from "../errors.js";
import { forgetOwner, isErasedOwner, type SessionAt } from "../identity/owner.js";
import type { LimitsMeter } from "../limits/meter.js";
import type { Outbox } from "../outbox/outbox.js";
import { afterDeleteWipe, hostReport } from "../platform/host-config.js";
import type { AlarmPlan } from "./alarm-plan.js";
import type { CreatedCheck } from "./created.js";
import type { DirectoryLink } from "./directory-link.js";
import type { OpenSession } from "./opening.js";
import type { SessionRetention } from "./retention.js";
import type { SessionWatches } from "./watches.js";

/** What a delete touches: the object's storage and the parts that keep state about it. */
export interface DestroyParts {
  readonly env: Env;
  readonly storage: DurableObjectStorage;
  readonly created: CreatedCheck;
  readonly directory: DirectoryLink;
  readonly watches: SessionWatches;
  readonly meter: LimitsMeter;
  readonly outbox: Outbox;
  readonly alarms: AlarmPlan;
  readonly retention: SessionRetention;
  readonly now: () => number;
  /** The object's open session, if any. */
  readonly session: () => OpenSession | undefined;
  /** The object forgets its open session (a delete has begun). */
  readonly forgetSession: () => void;
}

/**
 * Delete the session. `where`: a session this object does not hold but the directory still lists (a delete cut
 * between its wipe and its tombstone) is unlinked and answers deleted. `erased`: only if the session is that user's
 * (else kept). `expiry` (retention's delete): whether the open session is still expired and idle, decided in this
 * step; a commit that lands after the decision (before the harness closes) cancels the delete (`{ deleted: false }`).
 * Usage not yet reported goes to the limits first, and again for what commits made while the harness closed: not
 * acknowledged, 503 `metering_unavailable` and nothing deleted.
 */
export async function destroySession(
  parts: DestroyParts,
  where?: SessionAt,
  erased?: ErasedOwner,
  expiry?: (session: OpenSession) => Promise<boolean>,
): Promise<{ readonly deleted: boolean }> {
  if (!parts.created.created) {
    if (where !== undefined && (await parts.directory.orphaned(where))) return { deleted: true };
    throw new SessionNotFound();
  }
  // Checked on the lifecycle queue, so no delete and create of the name runs between the check and the wipe.
  if (
    erased !== undefined &&
    (where === undefined ||
      !(await isErasedOwner(parts.env, where, parts.storage.kv, parts.directory.createdAt, erased)))
  )
    return { deleted: false };
  const current = parts.session();
  let decided: number | undefined;
  if (expiry !== undefined) {
    if (current === undefined || current.stale || !(await expiry(current))) return { deleted: false };
    decided = current.harness.storage.lastSeq;
  }
  await parts.meter.handOverOrRefuse();
  // Every watcher gets its close frame before DELETE answers (and before its feed would end it as "the session closed").
  parts.watches.endAll("the session was deleted");
  parts.forgetSession();
  if (current !== undefined) {
    current.feeds.close();
    await current.harness
      .close(BACKGROUND_CONTEXT)
      .catch((error: unknown) => hostReport({ type: "harness", report: error }));
    // A commit after the decision (one already on the line when it was taken) cancels the expiry's delete.
    if (decided !== undefined && current.harness.storage.lastSeq !== decided) {
      parts.watches.forget();
      return { deleted: false };
    }
  }
  parts.watches.forget();
  await parts.meter.handOverOrRefuse();
  parts.outbox.closed();
  const row = parts.directory.snapshot();
  await parts.storage.deleteAlarm();
  await parts.storage.deleteAll();
  forgetOwner(parts.storage.kv);
  parts.created.wiped();
  parts.alarms.cleared(parts.now());
  parts.retention.cleared();
  parts.meter.cleared();
  afterDeleteWipe();
  // The tombstone stays in KV (and on the alarm) until the directory acknowledges it.
  await parts.directory.deleted(row);
  return { deleted: true };
}
