/**
 * Export and import of a session (docs/operations.md "Export and import", docs/api.md): GET .../export streams
 * the session as JSONL (an operator's whole, a user's own redacted), POST .../import (operator) stages an export
 * into a new session and links it only when every line validated. The import's body is read as a stream by the
 * session object, up to MAX_IMPORT_BYTES (the app's general body limit does not apply to it).
 */
import { Hono } from "hono";
import { requires, type AppEnv } from "../../identity/auth.js";
import { Problem } from "../../problems.js";
import { noQuery } from "../../schemas.js";
import { MAX_IMPORT_BYTES } from "../../../api/transfer.js";
import { body as readBody, query, run, session, sessionParam, sessionStub } from "./shared.js";
import { emptyBody } from "../../../api/schemas.js";

export const transferRoutes = new Hono<AppEnv>();

/** Whether a request is an import (POST /v1/sessions/{session}/import): its body limit is its own. */
export function isImport(method: string, path: string): boolean {
  return method === "POST" && /^\/v1\/sessions\/[^/]+\/import$/.test(path);
}

/** The JSONL media type of an export. */
export const EXPORT_CONTENT_TYPE = "application/jsonl";

transferRoutes.get("/:session/export", requires("export"), async (c) => {
  query(c, noQuery);
  const name = sessionParam(c);
  const stream = await run(session(c).exportSession(name, c.get("claims").role === "user"));
  return new Response(stream, {
    headers: {
      "content-type": EXPORT_CONTENT_TYPE,
      "content-disposition": `attachment; filename="${name}.jsonl"`,
    },
  });
});

transferRoutes.post("/:session/import", requires("import"), async (c) => {
  query(c, noQuery);
  const name = sessionParam(c);
  const length = c.req.header("content-length");
  if (length !== undefined && Number(length) > MAX_IMPORT_BYTES)
    throw new Problem("payload_too_large", `an import is limited to ${MAX_IMPORT_BYTES} bytes`);
  const body = c.req.raw.body;
  if (body === null)
    throw new Problem("invalid_import", "line 1: the body is empty: an export starts with its header line", undefined, {
      line: 1,
    });
  const tenant = c.get("claims").tenant;
  const result = await run(sessionStub(c.env, tenant, name).importSession({ tenant, session: name }, body));
  return c.json(result, 201);
});

/** An imported copy's rig comes back paused: an operator resumes it (GUPP and the witness run again). */
transferRoutes.post("/:session/rig/resume", requires("import"), async (c) => {
  query(c, noQuery);
  await readBody(c, emptyBody, { optional: true });
  return c.json(await run(session(c).op("rigResume")));
});
