/**
 * A session's incarnation (docs/api.md "Sessions"): a random id the host mints in the commit that creates
 * the session and keeps with it. A session deleted and created again under the same name starts its task
 * ids over, so every key that leaves the object names the incarnation too, and nothing of the old one
 * (a product's de-duplication, a late result, a stale approval, a usage report) reaches the new one.
 *
 *   incarnation          10 characters of 0-9 a-v (50 random bits)
 *   session key          {session}:{incarnation}
 *   remote call key      {session}:{incarnation}:{taskId}   (an HTTP tool's Idempotency-Key and webhook-id)
 *   pending id           t{taskId}-approval-{incarnation}, t{taskId}-client-{incarnation}
 *
 * A session created before incarnations existed has none: its keys keep the older forms (`{session}`,
 * `{session}:{taskId}`, `t{taskId}-approval`), so its calls in flight keep their keys.
 */
import type { Id } from "../storage/records.js";

/** An incarnation's form. */
export const INCARNATION = /^[0-9a-v]{10}$/;

/** `{session}:{incarnation}` (`{session}` without one): what a session's usage and reservation keys start with. */
export function sessionKey(session: string, incarnation: string | undefined): string {
  return incarnation === undefined ? session : `${session}:${incarnation}`;
}

/** A remote call's Idempotency-Key and webhook-id: `{session}:{incarnation}:{taskId}`. */
export function remoteCallKey(session: string, incarnation: string | undefined, taskId: Id): string {
  return `${sessionKey(session, incarnation)}:${taskId}`;
}

/** The session, incarnation and task a remote call key names; undefined for anything else. */
export function parseRemoteCallKey(
  key: string,
): { readonly session: string; readonly incarnation?: string; readonly taskId: Id } | undefined {
  const match = /^([^:]+)(?::([0-9a-v]{10}))?:([1-9][0-9]{0,15})$/.exec(key);
  if (match === null) return undefined;
  return {
    session: match[1] as string,
    ...(match[2] === undefined ? {} : { incarnation: match[2] }),
    taskId: Number(match[3]),
  };
}
