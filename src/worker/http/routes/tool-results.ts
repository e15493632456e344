/**
 * `POST /v1/tool-results/{tenant}/{session}/{taskId}`: an HTTP tool's late result (after it answered 202).
 * No bearer token: the delivery is signed (Standard Webhooks) with the tool's own secret
 * (`toolSecret(master, tenant, tool, generation)`: the tool's current generation, or the one before for 7 days after a
 * rotation, http/routes/tools.ts), and its `webhook-id` must be `{session}:{incarnation}:{taskId}`
 * (src/kinds/incarnation.ts), the id the request to the tool carried, so a signed result cannot be replayed
 * against another session or call. An unknown session or task, or one that is not a remote call, is refused
 * exactly like a bad signature (401 `invalid_signature`, after computing the HMAC against a stand-in key), and so
 * is every other failure to authenticate (missing or malformed headers, another call's id), so the route reveals
 * nothing. A verified delivery for a call of a deleted incarnation of the session (deleted and created again under
 * its name: the task ids started over) is an unknown call: 404 `not_found`, and nothing is written. The body
 * `{ output, isError? }` is recorded once as the remote call's answer:
 * 200 `{ taskId, recordedAt }`; again → 409 `already_answered` with the committed result; after the call
 * ended without one → 409 `pending_closed`. A refusal writes nothing.
 */
import { Hono } from "hono";
import type { AppEnv } from "../../identity/auth.js";
import { idString, noQuery, parse, sessionName, tenantName, toolResultBody } from "../../schemas.js";
import { Problem } from "../../problems.js";
import { parseRemoteCallKey } from "../../../kinds/incarnation.js";
import { masterSecret, toolSecret, verifyWebhook } from "../../crypto/webhooks.js";
import { redactJson, redactor } from "../../remote/redaction.js";
import { directoryStub } from "../../directory/object.js";
import { hostClock } from "../../platform/host-config.js";
import { parseBody, query, run, sessionStub } from "./shared.js";

export const toolResultRoutes = new Hono<AppEnv>();

/** What an unknown task's signature is computed against: no tool has this name (tool names hold no spaces). */
const STAND_IN_TOOL = "no tool";

/** Every refusal of who sent it looks the same. */
function unsigned(): Problem {
  return new Problem("invalid_signature", "the delivery is not signed for this tool call", "webhook-signature");
}

/** A signed delivery for a call this session does not have (one of a deleted incarnation). */
function unknownCall(key: string): Problem {
  return new Problem("not_found", `no remote call ${key} in this session`, "webhook-id");
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
  const stub = sessionStub(c.env, tenant, name);
  // A session that does not exist, or a task that is not a remote call: the same 401, after the same HMAC (against a
  // stand-in key), so no answer tells which names exist; every failure to authenticate is that one answer.
  const found = await stub.op("remoteCallTool", taskId);
  const tool = found.ok && found.value !== null ? found.value.tool : undefined;
  // The generations that verify: the tool's current one, and the one before while its overlap lasts.
  const generations = await directoryStub(c.env, tenant).toolSecretGenerations(tool ?? STAND_IN_TOOL);
  const candidates = [
    generations.current,
    ...(generations.previous !== undefined && generations.previous.until > hostClock().now()
      ? [generations.previous.generation]
      : []),
  ];
  let secret = "";
  let verified = false;
  for (const generation of candidates) {
    secret = await toolSecret(master, tenant, tool ?? STAND_IN_TOOL, generation);
    verified = await verifyWebhook(secret, headers, text, Date.now()).then(
      () => true,
      (error: unknown) => {
        if (error instanceof Problem && error.code === "invalid_signature") return false;
        throw error;
      },
    );
    if (verified) break;
  }
  const key = parseRemoteCallKey(headers.id ?? "");
  if (!verified || !found.ok || found.value === null || key === undefined) throw unsigned();
  if (key.session !== name || key.taskId !== taskId) throw unsigned();
  const incarnation = key.incarnation ?? null;
  if (incarnation !== found.value.incarnation) throw unknownCall(headers.id ?? "");
  const result = parseBody(c.req.header("content-type"), text, toolResultBody);
  const recorded = await run(
    stub.op("answerRemoteCall", taskId, incarnation, {
      // A product that echoes its secret: the secret never reaches the transcript (remote/redaction.ts).
      output: redactJson(result.output, redactor({ secrets: [secret] })),
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
