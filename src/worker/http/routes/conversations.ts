/**
 * Conversation routes: accept input (Idempotency-Key, ?wait), snapshot, entries paging, abort, delete
 * (a non-root conversation with its ownership subtree), fork, collapse, reset and config. `{conversation}` is an id or
 * `root`.
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../../identity/auth.js";
import { Problem } from "../../problems.js";
import { canonical } from "../../session/config.js";
import { admitWork, limited, limitsOf, payerOf } from "../../limits/admission.js";
import { acceptedBy } from "./accepting.js";
import { sessionKey } from "../../../kinds/incarnation.js";
import { refuseUnknownProfile, refuseUserPatch } from "../../directory/templates.js";
import { requireUserAction } from "../../identity/user-access.js";
import {
  type AcceptBody,
  acceptBody,
  acceptQuery,
  collapseBody,
  configPatch,
  emptyBody,
  entriesQuery,
  forkBody,
  noQuery,
  parse,
  requestKey,
  resetBody,
} from "../../schemas.js";
import { beforeSession, body, conversationParam, query, run, session, sessionParam } from "./shared.js";
import { presentEntryToUser, presentTaskToUser } from "../../../kinds/stored.js";

export const conversationRoutes = new Hono<AppEnv>();

/** SHA-256 of the canonical JSON of an accept body: what an Idempotency-Key's reuse is compared by. */
async function requestHash(input: AcceptBody): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonical(input)));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

const base = "/:session/conversations/:conversation";

conversationRoutes.post(`${base}/inputs`, requires("input"), async (c) => {
  const stub = session(c);
  const { ref, wait, key, input } = await beforeSession(c, async () => {
    const header = c.req.header("idempotency-key");
    return {
      ref: conversationParam(c),
      wait: query(c, acceptQuery).wait,
      key: header === undefined ? undefined : parse(requestKey, header, "invalid_header", "idempotency-key"),
      input: await body(c, acceptBody),
    };
  });
  const response = await acceptedBy(c.env, payerOf(c.get("claims")), stub, sessionParam(c), ref, {
    input: input.input,
    ...(input.mode === undefined ? {} : { mode: input.mode }),
    ...(input.whenBusy === undefined ? {} : { whenBusy: input.whenBusy }),
    ...(key === undefined ? {} : { source: { type: "idempotency", key }, requestHash: await requestHash(input) }),
    ...(wait === undefined ? {} : { waitSeconds: wait }),
  });
  return c.json(response, response.duplicate ? 200 : 201);
});

conversationRoutes.get(base, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const snapshot = await run(stub.op("snapshot", ref));
  // A user token sees each remote call's tool, never its URL.
  return c.json(
    c.get("claims").role === "user" ? { ...snapshot, tasks: snapshot.tasks.map(presentTaskToUser) } : snapshot,
  );
});

conversationRoutes.get(`${base}/entries`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  const q = query(c, entriesQuery);
  if (q.before !== undefined && q.after !== undefined && q.after >= q.before) {
    throw new Problem("invalid_cursor", "after must be below before", "after");
  }
  const page = await run(stub.op("entries", ref, q));
  // A user token sees an inbound delivery's source, never its payload (the operator's).
  return c.json(c.get("claims").role === "user" ? { ...page, items: page.items.map(presentEntryToUser) } : page);
});

conversationRoutes.post(`${base}/abort`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("abort", ref)));
});

conversationRoutes.delete(base, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  return c.json(await run(stub.op("deleteConversation", ref)));
});

conversationRoutes.post(`${base}/fork`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const options = await body(c, forkBody);
  // Aborting the running turn is an abort, whatever route carries it: it needs `write`.
  if (options.abort === true) requireUserAction(c.get("claims"), "write", "a fork that aborts the running turn");
  return c.json(
    await run(
      stub.op("fork", ref, options.abort === undefined ? { at: options.at } : { at: options.at, abort: options.abort }),
    ),
    201,
  );
});

conversationRoutes.post(`${base}/continue`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  // A new turn: admitted and counted as an input (every limit), holding no turn slot; the session reserves it
  // (limits/admission.ts) and gives it back when it refuses (409 nothing_waiting).
  const payer = payerOf(c.get("claims"));
  const admission = limited(await limitsOf(c.env, payer.tenant)) ? { payer, session: sessionParam(c) } : undefined;
  return c.json(await run(stub.op("continue", ref, admission)));
});

conversationRoutes.post(`${base}/collapse`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const options = await body(c, collapseBody, { optional: true });
  // A model call: admitted like an input, counted as none (its tokens settle like any turn's).
  await admitWork(c.env, c.get("claims"));
  return c.json(await run(stub.op("collapse", ref, options.instructions)), 202);
});

conversationRoutes.post(`${base}/reset`, requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const options = await body(c, resetBody, { optional: true });
  return c.json(await run(stub.op("reset", ref, options.handoff)));
});

conversationRoutes.get(`${base}/config`, requires("config"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  return c.json(await run(stub.op("getConfig", ref)));
});

conversationRoutes.patch(`${base}/config`, requires("config"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const patch = await body(c, configPatch);
  await refuseUserPatch(c.get("claims"), stub, patch);
  await refuseUnknownProfile(c.env, c.get("claims").tenant, patch.profile);
  return c.json(await run(stub.op("patchConfig", ref, patch)));
});
