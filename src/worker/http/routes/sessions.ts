/**
 * Session routes: create (PUT, 201 / 200 / 409), summary, delete, inputs by id, acceptances by request
 * key, usage, and the operator's tasks, inspect, shutdown, fault and quarantine routes.
 */
import { Hono } from "hono";
import { refuseOutsideClaim, requires, type AppEnv } from "../../identity/auth.js";
import { decodeCursor, directoryStub } from "../../directory/object.js";
import { Problem } from "../../problems.js";
import type { z } from "zod";
import {
  emptyBody,
  METADATA_PARAM,
  metadataFilters,
  noQuery,
  parse,
  queryObject,
  requestKey,
  sessionConfig,
  sessionName,
  sessionPatch,
  sessionsQuery,
  tasksQuery,
  entriesQuery,
} from "../../schemas.js";
import type { SessionConfig } from "../../session/api.js";
import { creator, cursorBinding, listedSessions, newSessionName } from "../../identity/user-access.js";
import { beforeSession, body, idParam, query, run, session, sessionStub, type AppContext } from "./shared.js";
import { presentTaskToUser } from "../../../kinds/stored.js";
import { refuseProfileAtCreate, refuseUserPatch, resolveTemplateForUser } from "../../directory/templates.js";

export const sessionRoutes = new Hono<AppEnv>();

/**
 * The caller's tenant's sessions from its directory, newest activity first; a user token sees only its
 * own sessions (the owner filter is in the directory's query, so every page and filter keeps it; an `owner`
 * naming anyone else is 403), and its cursors are bound to it (another caller's cursor is invalid_cursor). A token
 * naming its sessions lists only those (the filter is in the query too). `owner`, `status`, `activeSince`,
 * `activeBefore` and `metadata.{key}` filter in the directory's own indexes: no session object is asked.
 */
sessionRoutes.get("/", requires("session.read"), async (c) => {
  const { metadata, rest } = splitMetadataParams(queryObject(new URL(c.req.url)));
  const q = parse(sessionsQuery, rest, "invalid_query");
  const claims = c.get("claims");
  if (claims.role === "user" && q.owner !== undefined && q.owner !== claims.sub)
    throw new Problem("forbidden", "owner: a user token lists only its own sessions", "owner");
  const binding = await cursorBinding(claims);
  const names = listedSessions(claims);
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  // Unreadable, or bound to another caller's listing: a cursor is only good for the listing it came from.
  if (q.cursor !== undefined && (after === undefined || after.binding !== binding)) {
    throw new Problem("invalid_cursor", "the cursor is not one a previous page of this listing returned", "cursor");
  }
  const owner = claims.role === "user" ? (claims.sub ?? "") : q.owner;
  const page = await directoryStub(c.env, claims.tenant).list({
    limit: q.limit ?? 50,
    ...(q.cursor === undefined ? {} : { cursor: q.cursor }),
    ...(q.q === undefined ? {} : { q: q.q }),
    ...(owner === undefined ? {} : { owner }),
    ...(names === undefined ? {} : { names }),
    ...(metadata === undefined ? {} : { metadata }),
    ...(q.status === undefined ? {} : { status: q.status }),
    ...(q.activeSince === undefined ? {} : { activeSince: q.activeSince }),
    ...(q.activeBefore === undefined ? {} : { activeBefore: q.activeBefore }),
    ...(binding === undefined ? {} : { binding }),
  });
  return c.json(page);
});

/** The `metadata.{key}` parameters (validated: 400 naming `metadata.{key}`), and the others. */
function splitMetadataParams(params: Readonly<Record<string, string>>): {
  readonly metadata: Readonly<Record<string, string>> | undefined;
  readonly rest: Readonly<Record<string, string>>;
} {
  const pairs: Record<string, string> = {};
  const rest: Record<string, string> = {};
  for (const [name, value] of Object.entries(params)) {
    if (name.startsWith(METADATA_PARAM)) pairs[name.slice(METADATA_PARAM.length)] = value;
    else rest[name] = value;
  }
  if (Object.keys(pairs).length === 0) return { metadata: undefined, rest };
  return { metadata: parse(metadataFilters, pairs, "invalid_query", "metadata"), rest };
}

/** A body whose metadata is invalid (key, value or count) is 422 `invalid_metadata` naming the field. */
async function bodyOf<S extends z.ZodType>(c: AppContext, schema: S, optional = false): Promise<z.output<S>> {
  try {
    return await body(c, schema, { optional });
  } catch (error) {
    if (error instanceof Problem && error.code === "invalid_body" && error.field?.split(".")[0] === "metadata")
      throw new Problem("invalid_metadata", error.detail, error.field);
    throw error;
  }
}

/** Create `name` with the body's config (an `owner` in the body is ignored: a user token's `sub` owns it). */
async function createNamed(
  c: AppContext,
  name: string,
): Promise<{ readonly created: boolean; readonly config: SessionConfig }> {
  const { owner: _ignored, ...fields } = await bodyOf(c, sessionConfig, true);
  const claims = c.get("claims");
  // While the user is being erased, its sessions are being deleted: a new one would outlive the erasure.
  if (
    claims.role === "user" &&
    claims.sub !== undefined &&
    (await directoryStub(c.env, claims.tenant).erasing(claims.sub))
  )
    throw new Problem("user_erasing", `user ${claims.sub} is being erased; create sessions once its erasure is done`);
  // A user creates from an operator's template and may set only what it marks user-settable (directory/templates.ts).
  const resolved = await resolveTemplateForUser(c.env, claims, fields);
  await refuseProfileAtCreate(c.env, claims.tenant, resolved.config.profile, resolved.config.variables);
  return run(
    sessionStub(c.env, claims.tenant, name).createSession(
      resolved.config,
      { tenant: claims.tenant, session: name, ...creator(claims, name) },
      resolved.binding,
      resolved.retention,
    ),
  );
}

sessionRoutes.put("/:session", requires("session.create"), async (c) => {
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  query(c, noQuery);
  const result = await createNamed(c, name);
  return c.json({ session: name, ...result }, result.created ? 201 : 200);
});

/**
 * Create a session under a server-assigned, unguessable name (201 with Location): the way for browsers,
 * since a PUT on a name that exists (and is not the caller's) reveals that it exists.
 */
sessionRoutes.post("/", requires("session.create"), async (c) => {
  query(c, noQuery);
  // A token naming its sessions creates none under a new name (a name it could not then use).
  refuseOutsideClaim(c.get("claims"), undefined);
  const name = newSessionName();
  const result = await createNamed(c, name);
  c.header("location", `/v1/sessions/${name}`);
  return c.json({ session: name, ...result }, 201);
});

sessionRoutes.get("/:session", requires("session.read"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const summary = await run(stub.op("summary"));
  const { meta, retention } = await stub.details();
  return c.json({
    session: c.req.param("session"),
    ...summary,
    ...(meta === undefined ? {} : { title: meta.title ?? null, labels: meta.labels, metadata: meta.metadata }),
    ...(retention === undefined ? {} : { retention }),
  });
});

sessionRoutes.patch("/:session", requires("session.create"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const { variables, ...change } = await bodyOf(c, sessionPatch);
  const claims = c.get("claims");
  // Variables are the operator's and the product's (clients): a user or agent token sets none.
  if (variables !== undefined && claims.role !== "operator" && claims.role !== "client")
    throw new Problem("forbidden", `a ${claims.role} token may not set variables`, "variables");
  await refuseUserPatch(claims, stub, change);
  // One session call checks both (the metadata limit against the session's keys, the variable cap after the merge)
  // before it writes either: a refused PATCH writes nothing.
  const { meta, variables: set } =
    change.title === undefined &&
    change.labels === undefined &&
    change.metadata === undefined &&
    variables === undefined
      ? { meta: await stub.directoryMeta(), variables: undefined }
      : await run(stub.relabel(change, variables));
  return c.json({
    session: c.req.param("session"),
    title: meta?.title ?? null,
    labels: meta?.labels ?? [],
    metadata: meta?.metadata ?? {},
    ...(set === undefined ? {} : { variables: set }),
  });
});

/**
 * A retried delete repairs a cut one: a name the tenant's directory still lists but no object holds is unlinked and
 * answers deleted; a name neither holds is 404, and a directory that cannot answer is 500, never 404.
 */
sessionRoutes.delete("/:session", requires("delete"), async (c) => {
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const stub = session(c);
  query(c, noQuery);
  const deleted = await run(stub.destroy({ tenant: c.get("claims").tenant, session: name }));
  return c.json(deleted);
});

sessionRoutes.get("/:session/inputs/:inputId", requires("input"), async (c) => {
  const stub = session(c);
  const inputId = await beforeSession(c, () => {
    const id = idParam(c, "inputId");
    query(c, noQuery);
    return id;
  });
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

/** The session's tasks; a user token sees each remote call's tool, never its URL (`presentTaskToUser`). */
sessionRoutes.get("/:session/tasks", requires("tasks"), async (c) => {
  const stub = session(c);
  const q = query(c, tasksQuery);
  const page = await run(
    stub.op("tasks", {
      ...(q.live === undefined ? {} : { live: q.live === "true" }),
      ...(q.conversation === undefined ? {} : { conversation: q.conversation }),
      ...(q.after === undefined ? {} : { after: q.after }),
      ...(q.limit === undefined ? {} : { limit: q.limit }),
    }),
  );
  return c.json(c.get("claims").role === "user" ? { ...page, items: page.items.map(presentTaskToUser) } : page);
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
