/**
 * Session routes: create (PUT, 201 / 200 / 409), summary, delete, inputs by id, acceptances by request
 * key, usage, and the operator's tasks, inspect, shutdown, fault and quarantine routes.
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../auth.js";
import { decodeCursor, directoryStub } from "../directory-object.js";
import { Problem } from "../problems.js";
import { emptyBody, noQuery, parse, requestKey, sessionConfig, sessionName, sessionPatch, sessionsQuery, tasksQuery, entriesQuery } from "../schemas.js";
import { body, idParam, query, run, session } from "./shared.js";
import { refuseUserPatch, resolveTemplateForUser } from "../session-templates.js";

export const sessionRoutes = new Hono<AppEnv>();

/** The caller's tenant's sessions from its directory, newest activity first. */
sessionRoutes.get("/", requires("session.read"), async (c) => {
  const q = query(c, sessionsQuery);
  if (q.cursor !== undefined && decodeCursor(q.cursor) === undefined) throw new Problem("invalid_cursor", "the cursor is not one a previous page returned", "cursor");
  const page = await directoryStub(c.env, c.get("claims").tenant).list({
    limit: q.limit ?? 50,
    ...(q.cursor === undefined ? {} : { cursor: q.cursor }),
    ...(q.q === undefined ? {} : { q: q.q }),
  });
  return c.json(page);
});

sessionRoutes.put("/:session", requires("session.create"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const resolved = await resolveTemplateForUser(c.env, c.get("claims"), await body(c, sessionConfig, { optional: true }));
  const result = await run(stub.createSession(resolved.config, { tenant: c.get("claims").tenant, session: parse(sessionName, c.req.param("session"), "invalid_id", "session") }, resolved.binding));
  return c.json({ session: c.req.param("session"), ...result }, result.created ? 201 : 200);
});

sessionRoutes.get("/:session", requires("session.read"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const summary = await run(stub.op("summary"));
  const meta = await stub.directoryMeta();
  return c.json({ session: c.req.param("session"), ...summary, ...(meta === undefined ? {} : { title: meta.title ?? null, labels: meta.labels }) });
});

sessionRoutes.patch("/:session", requires("session.create"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const change = await body(c, sessionPatch);
  await refuseUserPatch(c.get("claims"), stub, change);
  const meta = await run(stub.relabel(change));
  return c.json({ session: c.req.param("session"), title: meta.title ?? null, labels: meta.labels });
});

sessionRoutes.delete("/:session", requires("delete"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const deleted = await run(stub.destroy());
  return c.json(deleted);
});

sessionRoutes.get("/:session/inputs/:inputId", requires("input"), async (c) => {
  const stub = session(c);
  const inputId = idParam(c, "inputId");
  query(c, noQuery);
  return c.json(await run(stub.op("input", inputId)));
});

sessionRoutes.delete("/:session/inputs/:inputId", requires("input"), async (c) => {
  const stub = session(c);
  const inputId = idParam(c, "inputId");
  query(c, noQuery);
  return c.json(await run(stub.op("withdraw", inputId)));
});

sessionRoutes.get("/:session/acceptances/:requestKey", requires("input"), async (c) => {
  const stub = session(c);
  const key = parse(requestKey, c.req.param("requestKey"), "invalid_id", "requestKey");
  query(c, noQuery);
  const found = await run(stub.op("acceptance", { type: "idempotency", key }));
  return c.json({ requestKey: key, conversationId: found.conversationId, inputId: found.inputId });
});

sessionRoutes.get("/:session/usage", requires("usage"), async (c) => {
  const stub = session(c);
  const q = query(c, entriesQuery.pick({ after: true, limit: true }));
  return c.json(await run(stub.op("usage", q)));
});

sessionRoutes.get("/:session/tasks", requires("tasks"), async (c) => {
  const stub = session(c);
  const q = query(c, tasksQuery);
  return c.json(
    await run(
      stub.op("tasks", {
        ...(q.live === undefined ? {} : { live: q.live === "true" }),
        ...(q.conversation === undefined ? {} : { conversation: q.conversation }),
        ...(q.after === undefined ? {} : { after: q.after }),
        ...(q.limit === undefined ? {} : { limit: q.limit }),
      }),
    ),
  );
});

sessionRoutes.post("/:session/tasks/:taskId/abort", requires("tasks"), async (c) => {
  const stub = session(c);
  const taskId = idParam(c, "taskId");
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("abortTask", taskId)));
});

sessionRoutes.post("/:session/tasks/:taskId/release", requires("quarantine"), async (c) => {
  const stub = session(c);
  const taskId = idParam(c, "taskId");
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("releaseQuarantine", taskId)));
});

sessionRoutes.get("/:session/inspect", requires("inspect"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  return c.json(await run(stub.op("inspect")));
});

sessionRoutes.post("/:session/shutdown", requires("shutdown"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("shutdown")));
});

sessionRoutes.post("/:session/fault/clear", requires("fault"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  return c.json(await run(stub.op("clearFault")));
});
