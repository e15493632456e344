/**
 * `POST /v1/tool-results/{tenant}/{session}/{taskId}`: an HTTP tool's late result (after it answered 202).
 * No bearer token: the delivery is signed (Standard Webhooks) with the tool's own secret
 * (`toolSecret(master, tenant, tool)`), and its `webhook-id` must be `{session}:{taskId}`, the id the
 * request to the tool carried, so a signed result cannot be replayed against another session or call.
 * An unknown task, or one that is not a remote call, is refused like a bad signature (401), so the route
 * reveals nothing. The body `{ output, isError? }` is recorded once as the remote call's answer:
 * 200 `{ taskId, recordedAt }`; again → 409 `already_answered` with the committed result; after the call
 * ended without one → 409 `pending_closed`. A refusal writes nothing.
 */
import { Hono } from "hono";
import type { AppEnv } from "../../identity/auth.js";
import { idString, noQuery, parse, sessionName, tenantName, toolResultBody } from "../../schemas.js";
import { Problem } from "../../problems.js";
import { masterSecret, toolSecret, verifyWebhook } from "../../crypto/webhooks.js";
import { parseBody, query, run, sessionStub } from "./shared.js";

export const toolResultRoutes = new Hono<AppEnv>();

/** Every refusal of who sent it looks the same. */
function unsigned(): Problem {
  return new Problem("invalid_signature", "the delivery is not signed for this tool call", "webhook-signature");
}

toolResultRoutes.post("/:tenant/:session/:taskId", async (c) => {
  const tenant = parse(tenantName, c.req.param("tenant"), "invalid_id", "tenant");
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const taskId = parse(idString, c.req.param("taskId"), "invalid_id", "taskId");
  query(c, noQuery);
  const text = await c.req.text();
  const headers = {
    id: c.req.header("webhook-id"),
    timestamp: c.req.header("webhook-timestamp"),
    signature: c.req.header("webhook-signature"),
  };
  const master = masterSecret(c.env);
  if (headers.id !== `${name}:${taskId}`) throw unsigned();
  const stub = sessionStub(c.env, tenant, name);
  // A session that does not exist, or a task that is not a remote call: the same 401.
  const found = await stub.op("remoteCallTool", taskId);
  if (!found.ok || found.value === null) throw unsigned();
  await verifyWebhook(await toolSecret(master, tenant, found.value.tool), headers, text, Date.now());
  const result = parseBody(c.req.header("content-type"), text, toolResultBody);
  const recorded = await run(
    stub.op("answerRemoteCall", taskId, {
      output: result.output,
      ...(result.isError === undefined ? {} : { isError: result.isError }),
    }),
  );
  switch (recorded.type) {
    case "recorded":
      return c.json({ taskId, recordedAt: recorded.at }, 200);
    case "already_answered":
      throw new Problem("already_answered", `remote call ${taskId} already has its result`, undefined, {
        answer: { ...recorded.answer },
      });
    case "closed":
      throw new Problem(
        "pending_closed",
        `remote call ${taskId} ended without a posted result (${recorded.outcome})`,
        undefined,
        { outcome: recorded.outcome },
      );
    case "unknown":
      throw unsigned();
    default: {
      const never: never = recorded;
      throw new Error(`unknown result ${JSON.stringify(never)}`);
    }
  }
});
