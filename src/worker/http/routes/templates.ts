/**
 * Session templates and user revocation (docs/users.md), kept by the tenant's DirectoryObject:
 *
 *   PUT    /v1/templates/:template     (operator) the session PUT's fields + userSettable -> 201 / 200, the record,
 *   ETag
 *   GET    /v1/templates            (operator) { items }
 *   GET    /v1/templates/:template     (operator) the record, ETag; 404 template_not_found
 *   DELETE /v1/templates/:template     (operator) { name, deleted: true }; 404
 *   POST   /v1/users/:sub/revoke    (operator) refuse the user's tokens issued before now; close its open watches
 *   POST   /v1/users/:sub/erase     (operator) erase the user (directory/erasure-run.ts) -> 202 / 200, the erasure
 *   GET    /v1/erasures/:erasure    (operator) where an erasure stands; 404 erasure_not_found
 *
 * `If-Match: "<version>"` (or `*`: the template exists) makes a PUT or DELETE conditional (412
 * `precondition_failed` otherwise). A body that is not a valid template, and a name a PUT may not use,
 * are 422 `invalid_template` naming the field, and so is a tool a session could not select: each of
 * `selectedTools` is built in, or a live tool of the tenant's catalog (`{server}__{tool}`: in the
 * registered server's pinned list). A tool deleted after the put leaves a tombstone, so the template
 * stays valid and a call of it settles `tool_removed`. A `profile` the tenant does not hold is 422
 * `unknown_profile` naming `profile` (decided in the directory's write step, so a profile cannot be deleted
 * between the check and the write). Every refusal is decided before anything is written.
 * Sessions keep what their template said when they were created (directory/templates.ts).
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  erasureId,
  templateBody,
  templateName,
  userSub,
  type ErasureResponse,
  type TemplateRecord,
} from "../../../api/templates.js";
import type { ErasureRecord } from "../../directory/erasures.js";
import { subHashVersionOf, subjectHashKeyMissing, subjectHashKeySet } from "../../directory/subject-hash.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import type { TemplateIfMatch } from "../../directory/users.js";
import { unknownProfile } from "../../directory/templates.js";
import { Problem } from "../../problems.js";
import { builtinTools } from "../../session/kinds.js";
import { noteRevocation } from "../../identity/revocation.js";
import { emptyBody, noQuery, parse } from "../../schemas.js";
import { body, query, sessionStub, type AppContext } from "./shared.js";

function directory(c: AppContext): ReturnType<typeof directoryStub> {
  return directoryStub(c.env, c.get("claims").tenant);
}

function notFound(name: string): Problem {
  return new Problem("template_not_found", `the tenant has no template ${JSON.stringify(name)}`);
}

/** The `:name` of a read or delete: a name no PUT accepts names no template. */
function nameParam(c: AppContext): string {
  const name = c.req.param("template") ?? "";
  if (!templateName.safeParse(name).success) throw notFound(name);
  return name;
}

function ifMatch(c: AppContext): TemplateIfMatch | undefined {
  const header = c.req.header("if-match");
  if (header === undefined) return undefined;
  if (header.trim() === "*") return "*";
  const match = /^"([1-9][0-9]{0,15})"$/.exec(header.trim());
  if (match === null)
    throw new Problem("invalid_header", 'If-Match is a template ETag this server sent ("<version>") or *', "if-match");
  return Number(match[1]);
}

function precondition(name: string, current: number | undefined): Problem {
  return new Problem(
    "precondition_failed",
    current === undefined
      ? `If-Match: the tenant has no template ${JSON.stringify(name)}`
      : `If-Match: template ${name} is at version ${current}`,
    "if-match",
  );
}

function recordResponse(c: AppContext, record: TemplateRecord, status: 200 | 201 = 200): Response {
  c.header("ETag", `"${record.version}"`);
  return c.json(record, status);
}

/** Refuse a template whose `selectedTools` names a tool no session could select now (422 naming the entry). */
async function checkTools(c: AppContext, selected: readonly string[] | undefined): Promise<void> {
  const builtin = new Set(builtinTools.map((tool) => tool.name));
  if (selected === undefined || selected.every((name) => builtin.has(name))) return;
  const { records = [] } = await directory(c).catalog();
  const catalog = new Map(records.map((record) => [record.name, record]));
  selected.forEach((name, i) => {
    if (builtin.has(name)) return;
    const record = catalog.get(name);
    if (record === undefined) {
      const where = name.includes("__")
        ? "neither built in, in the tenant's catalog nor in a registered MCP server's pinned tool list"
        : "neither built in nor in the tenant's catalog";
      throw new Problem("invalid_template", `tool ${name} is ${where}; define it first`, `selectedTools.${i}`);
    }
    if (record.deleted || record.definition === undefined) {
      throw new Problem("invalid_template", `tool ${name} was deleted from the tenant's catalog`, `selectedTools.${i}`);
    }
  });
}

export const templateRoutes = new Hono<AppEnv>();

templateRoutes.put("/:template", requires("templates"), async (c) => {
  query(c, noQuery);
  const name = parse(templateName, c.req.param("template") ?? "", "invalid_template", "name");
  const condition = ifMatch(c);
  const { userSettable, ...fields } = parse(templateBody, await body(c, z.unknown()), "invalid_template");
  await checkTools(c, fields.selectedTools);
  const outcome = await directory(c).putTemplate(name, { ...fields, userSettable: userSettable ?? [] }, condition);
  switch (outcome.type) {
    case "stored":
      return recordResponse(c, outcome.record, outcome.created ? 201 : 200);
    case "precondition":
      throw precondition(name, outcome.current);
    case "too_many":
      throw new Problem(
        "invalid_template",
        `the tenant holds at most ${outcome.limit} templates; delete one first`,
        "name",
      );
    case "unknown_profile":
      throw unknownProfile(outcome.profile);
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

templateRoutes.get("/", requires("templates"), async (c) => {
  query(c, noQuery);
  return c.json({ items: await directory(c).listTemplates() });
});

templateRoutes.get("/:template", requires("templates"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const record = await directory(c).getTemplate(name);
  if (record === undefined) throw notFound(name);
  return recordResponse(c, record);
});

templateRoutes.delete("/:template", requires("templates"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const outcome = await directory(c).deleteTemplate(name, ifMatch(c));
  switch (outcome.type) {
    case "deleted":
      return c.json({ name, deleted: true as const });
    case "not_found":
      throw notFound(name);
    case "precondition":
      throw precondition(name, outcome.current);
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

export const userRoutes = new Hono<AppEnv>();

/**
 * Revoke a user: its tokens issued before now (and within this second) are refused, by this isolate at
 * once and by the others within their cache's minute (identity/revocation.ts); every session that may hold the
 * user's open watches is told to close them now. A session that cannot be reached is listed in
 * `unreached`: its watches still close at their token's expiry, and revoking again retries.
 */
userRoutes.post("/:sub/revoke", requires("users"), async (c) => {
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  const sub = parse(userSub, c.req.param("sub"), "invalid_id", "sub");
  const tenant = c.get("claims").tenant;
  const { revokedAt, sessions } = await directory(c).revokeUser(sub, Math.floor(Date.now() / 1000) + 1);
  noteRevocation(tenant, sub, revokedAt);
  const results = await Promise.allSettled(
    sessions.map((session) => sessionStub(c.env, tenant, session).closeWatches(sub, revokedAt)),
  );
  const unreached = sessions.filter((_, i) => results[i]?.status === "rejected");
  return c.json({ sub, revokedAt, sessions: sessions.length, unreached });
});

/**
 * Erase a user (docs/operations.md "Deleting a user's data"): one directory step records the erasure (only the sub's
 * hash), the cutoff that refuses the user's older tokens, and the sessions it owns; the user's open watches end at
 * once; the directory's alarm deletes the sessions, then the user's usage and directory rows, and sends `user.erased`. 202 with the erasure; 200 with the one
 * already running for the user.
 */
userRoutes.post("/:sub/erase", requires("users"), async (c) => {
  query(c, noQuery);
  await body(c, emptyBody, { optional: true });
  const sub = parse(userSub, c.req.param("sub"), "invalid_id", "sub");
  const tenant = c.get("claims").tenant;
  // The record is named by the keyed hash: without its key nothing is started (500 misconfigured naming it).
  if (!subjectHashKeySet(c.env)) throw subjectHashKeyMissing();
  const outcome = await directory(c).eraseUser(sub, tenant);
  noteRevocation(tenant, sub, outcome.record.cutoff);
  // The user's open watches end now, as a revocation's do; one not reached here ends in the erasure's last phase.
  const watched = await directory(c).watchedSessions(sub);
  await Promise.allSettled(
    watched.map((session) => sessionStub(c.env, tenant, session).closeWatches(sub, outcome.record.cutoff)),
  );
  c.header("location", `/v1/erasures/${outcome.record.id}`);
  return c.json(erasureOut(outcome.record), outcome.type === "started" ? 202 : 200);
});

export const erasureRoutes = new Hono<AppEnv>();

erasureRoutes.get("/:erasure", requires("users"), async (c) => {
  query(c, noQuery);
  const id = parse(erasureId, c.req.param("erasure"), "invalid_id", "erasure");
  const record = await directory(c).erasure(id);
  if (record === undefined) throw new Problem("erasure_not_found", `the tenant has no erasure ${id}`);
  return c.json(erasureOut(record));
});

function erasureOut(record: ErasureRecord): ErasureResponse {
  // A directory of the release before reads no version: its records are plain SHA-256.
  return { ...record, subHashVersion: subHashVersionOf(record.subHashVersion) };
}
