/**
 * The runner of user erasures (docs/operations.md "Deleting a user's data"), on the tenant's DirectoryObject's
 * alarm. Each round takes every due erasure one recorded step further:
 *
 *   sessions   delete each session the user owns through the session's own delete (the same path as
 *              DELETE /v1/sessions/{session}: every row, its outbox and its incarnation go, and the directory
 *              gets its tombstone); sessions listed for the user since are collected each round
 *   usage      the user's usage and metering rows in the tenant's LimitsObject
 *   directory  one step: the user's revocation and watch rows and the work row holding the sub go, the
 *              record is done, and a signed `user.erased` event is queued for each subscribed endpoint
 *
 * A call that fails is an outage, not an answer: the erasure stays where it is and is tried again after
 * RETRY_MS. Every step is recorded before the next begins, so a kill resumes where it stopped; deleting a
 * session twice answers "not found", which counts as deleted.
 */
import { sessionObjectName, type Env } from "../env.js";
import type { Outcome } from "../problems.js";
import { openSecret } from "../crypto/sealed-secrets.js";
import { signWebhook } from "../crypto/webhooks.js";
import { hostClock, hostFetch } from "../platform/host-config.js";
import { endpointSealContext, type EndpointStore, type SessionEndpoint } from "./endpoints.js";
import type { ErasureDelivery, ErasureStore, ErasureWork } from "./erasures.js";

/** A failed step is tried again after this long. */
export const RETRY_MS = 10_000;
/** Sessions deleted per erasure per round (a test may lower it: DirectoryObject.eraseBatch). */
export const ERASE_BATCH = 25;
/** A `user.erased` delivery still failing this long after its first attempt is given up. */
export const EVENT_RETRY_WINDOW_MS = 24 * 3_600_000;
const SEND_TIMEOUT_MS = 10_000;

/** The session object's delete as the runner calls it (SessionObject.destroy). */
interface SessionDelete {
  destroy(where: { readonly tenant: string; readonly session: string }): Promise<Outcome<{ readonly deleted: true }>>;
}

/** The LimitsObject's erase as the runner calls it (LimitsObject.eraseUser). */
interface UsageErase {
  eraseUser(sub: string): Promise<{ readonly rows: number }>;
}

export interface ErasureRunDeps {
  readonly env: Env;
  readonly store: ErasureStore;
  readonly endpoints: EndpointStore;
  readonly batch: number;
}

/** One round: every due erasure one phase on (or until a call fails), then the due `user.erased` deliveries. */
export async function eraseRound(deps: ErasureRunDeps): Promise<void> {
  for (const work of deps.store.due(hostClock().now())) {
    try {
      await runErasure(deps, work);
    } catch {
      // An outage (a session or the limits did not answer): the erasure waits and is tried again.
      deps.store.retryAt(work.id, hostClock().now() + RETRY_MS);
    }
  }
  await sendEvents(deps);
}

async function runErasure(deps: ErasureRunDeps, work: ErasureWork): Promise<void> {
  const { store, env } = deps;
  let phase = work.phase;
  if (phase === "sessions") {
    store.collect(work.id, work.sub);
    const pending = store.pendingSessions(work.id, deps.batch);
    for (const session of pending) {
      // A name the directory now lists for someone else was deleted and created again by another owner: not theirs.
      if (store.ownerOf(session) !== undefined && store.ownerOf(session) !== work.sub) {
        store.sessionDone(work.id, session, false);
        continue;
      }
      const stub = env.SESSIONS.get(
        env.SESSIONS.idFromName(sessionObjectName(work.tenant, session)),
      ) as unknown as SessionDelete;
      const outcome = await stub.destroy({ tenant: work.tenant, session });
      if (!outcome.ok && outcome.problem.code !== "session_not_found")
        throw new Error(`session ${session} was not deleted: ${outcome.problem.detail}`);
      store.sessionDone(work.id, session, true);
    }
    // More to delete (this batch's, or listed since): the next round goes on at once.
    if (pending.length === deps.batch || store.collect(work.id, work.sub) > 0) return;
    store.advance(work.id, "usage");
    phase = "usage";
  }
  if (phase === "usage") {
    const limits = env.LIMITS.get(env.LIMITS.idFromName(work.tenant)) as unknown as UsageErase;
    await limits.eraseUser(work.sub);
    store.advance(work.id, "directory");
    phase = "directory";
  }
  // A session listed for the user after its sessions phase (a directory update that came late) sends it back.
  if (store.collect(work.id, work.sub) > 0) {
    store.advance(work.id, "sessions");
    return;
  }
  const endpoints = deps.endpoints.subscribed("user.erased").map((endpoint) => endpoint.id);
  store.finish(work.id, work.sub, work.tenant, endpoints, hostClock().now());
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
