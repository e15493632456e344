/**
 * Accepting an input under the tenant's limits (docs/users.md "Limits and usage"), the one way every route
 * that posts an input does it: `POST .../inputs` (and so the session MCP server's `send_message`), signed
 * webhooks and inbound deliveries. When the tenant limits something, the session is told who pays (`admission`) and
 * reserves the input itself, inside the accept: after it found the request key new and before its accepting commit,
 * in one call to the LimitsObject that also carries the session's pending usage reports. A refusal by the session
 * gives the reservation back there; a retry of an accepted input (a `?wait` retry, a redelivery, a resent chat
 * message) makes no limits call. A request that fails before the session answered (its object restarted) asks the
 * session, by the request key, to give the reservation back when it never accepted the input.
 */
import type { AcceptResponse } from "../../../api/responses.js";
import type { Env } from "../../env.js";
import { limited, limitsOf, type Payer } from "../../limits/admission.js";
import { unwrap, type Outcome } from "../../problems.js";
import type { ConversationRef } from "../../schemas.js";
import type { AcceptRequest, InputAdmission, RequestSource } from "../../session/input-ops.js";
import type { ChatFork } from "../../session/chat-ops.js";
import type { SessionRpc } from "../../session/rpc.js";

export async function acceptedBy(
  env: Env,
  payer: Payer,
  stub: SessionRpc,
  session: string,
  ref: ConversationRef,
  request: AcceptRequest,
): Promise<AcceptResponse> {
  return admittedBy(env, payer, stub, session, request.source, (admission) =>
    stub.op("accept", ref, request, admission),
  );
}

/**
 * Accept a chat message on a fork the chat moves to (session/chat-ops.ts `chatAccept`): admitted before the fork is
 * made, so a refusal leaves the chat as it was.
 */
export async function acceptedOnFork(
  env: Env,
  payer: Payer,
  stub: SessionRpc,
  session: string,
  fork: ChatFork,
  request: Omit<AcceptRequest, "source">,
): Promise<AcceptResponse> {
  return admittedBy(env, payer, stub, session, fork.requestSource, (admission) =>
    stub.op("chatAccept", fork, request, admission),
  );
}

async function admittedBy(
  env: Env,
  payer: Payer,
  stub: SessionRpc,
  session: string,
  source: RequestSource | undefined,
  accept: (admission: InputAdmission | undefined) => Promise<Outcome<AcceptResponse>>,
): Promise<AcceptResponse> {
  const admission = limited(await limitsOf(env, payer.tenant)) ? { payer, session } : undefined;
  let outcome;
  try {
    outcome = await accept(admission);
  } catch (error) {
    // The object restarted mid-request: a reservation it made is given back only if it never accepted the input.
    if (admission !== undefined && source !== undefined)
      await stub.op("unreserve", source, admission).catch(() => undefined);
    throw error;
  }
  return unwrap(outcome);
}
