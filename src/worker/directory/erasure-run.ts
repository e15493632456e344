/**
 * The runner of user erasures (docs/operations.md "Deleting a user's data"), on the tenant's DirectoryObject's
 * alarm. Each round takes every due erasure one recorded step further:
 *
 *   sessions   delete each session of the erasure through the session's own delete (the same path as
 *              DELETE /v1/sessions/{session}: every row, its outbox and its incarnation go, and the directory
 *              gets its tombstone), which the session refuses unless it is the erased user's and was created
 *              before the cutoff (a name deleted and created again by someone else keeps its session); a session
 *              whose directory row lands after the start is claimed by the directory (ErasureStore.claim)
 *   usage      the user's usage and metering rows in the tenant's LimitsObject
 *   directory  the user's watches on sessions it does not own end (closeWatches, as a revocation's), then one
 *              step: the user's revocation and watch rows and the work row holding the sealed sub go, the record
 *              is done, and a signed `user.erased` event is queued for each subscribed endpoint
 *
 * and deletes the late sessions of finished erasures (rows that landed after the end) the same way.
 *
 * A call that fails is an outage, not an answer: the erasure stays where it is and is tried again after
 * RETRY_MS. Every step is recorded before the next begins, so a kill resumes where it stopped; deleting a
 * session twice answers "not found", which counts as deleted.
 */
import { sessionObjectName, type Env } from "../env.js";
import type { Outcome } from "../problems.js";
import { openSecret, type SealContext } from "../crypto/sealed-secrets.js";
import { signWebhook } from "../crypto/webhooks.js";
import { hostClock, hostFetch } from "../platform/host-config.js";
import { endpointSealContext, type EndpointStore, type SessionEndpoint } from "./endpoints.js";
import type { ErasedOwner, ErasureDelivery, ErasureStore, ErasureWork } from "./erasures.js";

/** A failed step is tried again after this long. */
export const RETRY_MS = 10_000;
/** Sessions deleted per erasure per round (a test may lower it: DirectoryObject.eraseBatch). */
export const ERASE_BATCH = 25;
/** A `user.erased` delivery still failing this long after its first attempt is given up. */
export const EVENT_RETRY_WINDOW_MS = 24 * 3_600_000;
const SEND_TIMEOUT_MS = 10_000;

/** The session object's calls as the runner makes them (SessionObject.eraseFor, SessionObject.closeWatches). */
interface SessionErase {
  eraseFor(
    where: { readonly tenant: string; readonly session: string },
    erased: ErasedOwner,
  ): Promise<Outcome<{ readonly deleted: boolean }>>;
  closeWatches(sub: string, before: number): Promise<{ readonly closed: number }>;
}

/** The LimitsObject's erase as the runner calls it on the tenant's object (LimitsObject.eraseUser: the user's shard too). */
interface UsageErase {
  eraseUser(sub: string, tenant: string): Promise<{ readonly rows: number }>;
}

export interface ErasureRunDeps {
  readonly env: Env;
  readonly store: ErasureStore;
  readonly endpoints: EndpointStore;
  readonly batch: number;
}

/**
 * One round: every due erasure one phase on (or until a call fails), the due late sessions, then the due `user.erased`
 * deliveries.
 */
export async function eraseRound(deps: ErasureRunDeps): Promise<void> {
  for (const work of deps.store.due(hostClock().now())) {
    try {
      await runErasure(deps, work);
    } catch {
      // An outage (a session or the limits did not answer): the erasure waits and is tried again.
      deps.store.retryAt(work.id, hostClock().now() + RETRY_MS);
    }
  }
  for (const late of deps.store.dueLate(hostClock().now(), deps.batch)) {
    const erased = { subHash: late.subHash, subHashVersion: late.subHashVersion, createdBefore: late.cutoff * 1000 };
    try {
      deps.store.lateDone(late, await eraseSession(deps.env, late.tenant, late.session, erased));
    } catch {
      deps.store.lateRetryAt(late, hostClock().now() + RETRY_MS);
    }
  }
  await sendEvents(deps);
}

function sessionOf(env: Env, tenant: string, session: string): SessionErase {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionObjectName(tenant, session))) as unknown as SessionErase;
}

/** Delete one session of an erasure: whether it went (or was gone); false: it is not the erased user's. */
async function eraseSession(env: Env, tenant: string, session: string, erased: ErasedOwner): Promise<boolean> {
  const outcome = await sessionOf(env, tenant, session).eraseFor({ tenant, session }, erased);
  if (outcome.ok) return outcome.value.deleted;
  if (outcome.problem.code === "session_not_found") return true;
  throw new Error(`session ${session} was not deleted: ${outcome.problem.detail}`);
}

/** The erasure's sub, opened from its seal (a row written before sealing holds it in clear). */
async function subOf(env: Env, work: ErasureWork): Promise<string> {
  switch (work.sub.type) {
    case "clear":
      return work.sub.sub;
    case "sealed":
      return openSecret(env, erasureSealContext(work.tenant, work.id), work.sub.sealed);
    default: {
      const never: never = work.sub;
      return never;
    }
  }
}

async function runErasure(deps: ErasureRunDeps, work: ErasureWork): Promise<void> {
  const { store, env } = deps;
  const erased = { subHash: work.subHash, subHashVersion: work.subHashVersion, createdBefore: work.cutoff * 1000 };
  if (work.phase === "sessions") {
    for (const session of store.pendingSessions(work.id, deps.batch))
      store.sessionDone(work.id, session, await eraseSession(env, work.tenant, session, erased));
    // More to delete (the rest of the batch, or claimed meanwhile): the next round goes on at once.
    if (store.pendingSessions(work.id, 1).length > 0 || !store.advance(work.id, "sessions", "usage")) return;
  }
  const sub = await subOf(env, work);
  if (work.phase !== "directory") {
    const limits = env.LIMITS.get(env.LIMITS.idFromName(work.tenant)) as unknown as UsageErase;
    await limits.eraseUser(sub, work.tenant);
    if (!store.advance(work.id, "usage", "directory")) return;
  }
  // The user's watches on sessions it does not own (a grant) end now, as a revocation's do; its own went with them.
  for (const session of store.watchedSessions(sub))
    await sessionOf(env, work.tenant, session).closeWatches(sub, work.cutoff);
  // A session claimed during these calls sent the erasure back: the next round deletes it first.
  if (store.get(work.id)?.phase !== "directory") return;
  const endpoints = deps.endpoints.subscribed("user.erased").map((endpoint) => endpoint.id);
  store.finish(work.id, sub, work.tenant, endpoints, hostClock().now());
}

/** What an erasure's sealed sub is bound to: it opens for this tenant and erasure only. */
export function erasureSealContext(tenant: string, erasure: string): SealContext {
  return { tenant, owner: erasure, field: "erasure.sub" };
}

async function sendEvents(deps: ErasureRunDeps): Promise<void> {
  const { store } = deps;
  const now = hostClock().now();
  const due = store.dueEvents(now, 20);
  if (due.length === 0) return;
  const endpoints = new Map(deps.endpoints.subscribed("user.erased").map((endpoint) => [endpoint.id, endpoint]));
  for (const delivery of due) {
    const endpoint = endpoints.get(delivery.endpoint);
    const record = store.get(delivery.erasure);
    if (endpoint === undefined || record === undefined) {
      // Deleted, disabled or unsubscribed since: nothing is sent.
      store.delivered(delivery);
      continue;
    }
    if (delivery.firstAttemptAt !== undefined && now - delivery.firstAttemptAt > EVENT_RETRY_WINDOW_MS) {
      store.delivered(delivery);
      continue;
    }
    store.attempting(delivery, now, now + backoff(delivery.attempts + 1));
    const body = JSON.stringify({
      id: `evt_${record.id}`,
      type: "user.erased",
      timestamp: new Date(record.finishedAt ?? now).toISOString(),
      data: {
        erasure: record.id,
        subHash: record.subHash,
        subHashVersion: record.subHashVersion,
        sessionsDeleted: record.sessionsDeleted,
      },
    });
    if (await send(deps.env, delivery, endpoint, `evt_${record.id}`, body, now)) store.delivered(delivery);
  }
}

/** 5 s doubling per attempt, at most an hour. */
function backoff(attempts: number): number {
  return Math.min(3_600_000, 5_000 * 2 ** Math.min(attempts - 1, 10));
}

async function send(
  env: Env,
  delivery: ErasureDelivery,
  endpoint: SessionEndpoint,
  id: string,
  body: string,
  now: number,
): Promise<boolean> {
  try {
    const secrets = [await openSecret(env, endpointSealContext(delivery.tenant, endpoint.id), endpoint.secret)];
    if (endpoint.previousSecret !== undefined && (endpoint.previousSecretExpiresAt ?? 0) > now)
      secrets.push(await openSecret(env, endpointSealContext(delivery.tenant, endpoint.id), endpoint.previousSecret));
    const timestamp = Math.floor(now / 1000);
    const signatures = await Promise.all(secrets.map((secret) => signWebhook(secret, id, timestamp, body)));
    const response = await hostFetch()(
      new Request(endpoint.url, {
        method: "POST",
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
        headers: {
          "content-type": "application/json",
          "user-agent": "pico-edge-webhooks/1",
          "webhook-id": id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signatures.join(" "),
        },
      }),
    );
    await response.body?.cancel();
    return response.status >= 200 && response.status < 300;
  } catch {
    return false;
  }
}
