/**
 * The pending list (docs/api.md "Pending"): calls that wait for a person or the frontend, an approval
 * before a tool runs or a client tool's output. Roles with `pending`: client, mayor, operator.
 *
 *   GET  /:session/pending                              the session's items
 *   GET  /:session/conversations/:conversation/pending  one conversation's items
 *   POST /:session/pending/:pendingId                   answer one: { approve, reason? } or { output, isError? }
 *
 * The body must fit the item's type, which its id names (`t12-approval-{incarnation}`, `t12-client-{incarnation}`); a body that
 * does not is 400 `invalid_body` naming the field, and writes nothing.
 */
import { Hono } from "hono";
import { approvalAnswerBody, clientAnswerBody, pendingIdParam } from "../../../api/pending.js";
import { parsePendingId } from "../../../kinds/pending-types.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { Problem } from "../../problems.js";
import { noQuery } from "../../schemas.js";
import { body, conversationParam, query, run, session } from "./shared.js";

export const pendingRoutes = new Hono<AppEnv>();

pendingRoutes.get("/:session/pending", requires("pending"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  return c.json({ items: await run(stub.op("pending", null)) });
});

pendingRoutes.get("/:session/conversations/:conversation/pending", requires("pending"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  return c.json({ items: await run(stub.op("pending", ref)) });
});

pendingRoutes.post("/:session/pending/:pendingId", requires("pending"), async (c) => {
  const stub = session(c);
  const raw = c.req.param("pendingId");
  const id = pendingIdParam.safeParse(raw).success ? raw : undefined;
  if (id === undefined) throw new Problem("pending_not_found", `nothing is pending under ${raw}`, "pendingId");
  query(c, noQuery);
  const answer =
    parsePendingId(id)?.type === "approval" ? await body(c, approvalAnswerBody) : await body(c, clientAnswerBody);
  return c.json(await run(stub.op("answerPending", id, answer)));
});
