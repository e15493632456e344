/**
 * Accepting an input under the tenant's limits (docs/users.md "Limits and usage"), the one way every route
 * that posts an input does it: `POST .../inputs` (and so the session MCP server's `send_message`), signed
 * webhooks and inbound deliveries. The input is reserved before the session sees it, keyed by its request
 * key in this incarnation of the session; a refusal by the session, or a failed request the session confirms
 * it never accepted, gives the reservation back; a duplicate (a redelivery) is answered without counting.
 *
 * A retry of an accepted input (a `?wait` retry, a redelivery, a resent chat message) makes no limits call: when
 * something is limited and the request has a key, the session is asked first whether it accepted that key
 * (`acceptIfKnown`), and answers a known one as the accept would; it was admitted when it was accepted. An unknown
 * key costs no extra call: the same answer carries the session's incarnation, which the reservation is keyed by.
 */
import type { AcceptResponse } from "../../../api/responses.js";
import { sessionKey } from "../../../kinds/incarnation.js";
import type { Env } from "../../env.js";
import { limited, limitsOf, reserveInput, unreserveOnFailure, type Payer } from "../../limits/admission.js";
import { unwrap } from "../../problems.js";
import type { ConversationRef } from "../../schemas.js";
import { requestId, type AcceptRequest } from "../../session/input-ops.js";
import type { SessionRpc } from "../../session/rpc.js";

export async function acceptedBy(
  env: Env,
  payer: Payer,
  stub: SessionRpc,
  session: string,
  ref: ConversationRef,
  request: AcceptRequest,
): Promise<AcceptResponse> {
  const source = request.source;
  let incarnation: { readonly value: string | undefined } | undefined;
  if (source !== undefined && limited(await limitsOf(env, payer.tenant))) {
    const known = unwrap(await stub.op("acceptIfKnown", ref, { ...request, source }));
    if (!("known" in known)) return known;
    incarnation = { value: known.incarnation };
  }
  const reserved = await reserveInput(
    env,
    payer,
    async () => sessionKey(session, incarnation === undefined ? await stub.incarnation() : incarnation.value),
    source === undefined ? undefined : requestId(source),
  );
  const response = await unreserveOnFailure(
    reserved,
    stub.op("accept", ref, request),
    // A failed request gives its reservation back only when the session says it never accepted the input.
    source === undefined
      ? undefined
      : async () => {
          const found = await stub.op("acceptance", source);
          if (found.ok) return true;
          return found.problem.code === "acceptance_not_found" ? false : undefined;
        },
  );
  // A redelivery the limits did not recognise (its reservation was pruned): it is not a new input.
  if (response.duplicate) await reserved?.cancel();
  return response;
}
