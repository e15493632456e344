/**
 * A tenant's tool catalog (docs/tools.md), kept by the tenant's DirectoryObject:
 *
 *   PUT    /v1/tools/:tool   (operator) a definition -> 201 created / 200 replaced, the record, ETag
 *   GET    /v1/tools         (operator) { items }: the live tools; ETag: the catalog version
 *   GET    /v1/tools/:tool   (operator) the record, ETag; 404 tool_not_found (also a deleted tool)
 *   DELETE /v1/tools/:tool   (operator) { name, deleted: true, version }; 404
 *   POST   /v1/tools/:tool/rotate-secret  (operator) an HTTP tool's next secret generation, answered once
 *
 * An HTTP tool's signing secret stays derived from WEBHOOK_MASTER_SECRET (crypto/webhooks.ts `toolSecret`: the
 * tenant, the tool's name and a generation), never stored: the PUT that makes a tool an HTTP tool answers it
 * (`secret`), and a rotation answers the next generation's. New calls sign with the current generation; a late result
 * verifies with it, or with the one before for TOOL_SECRET_OVERLAP_MS (7 days, the longest a call waits) after the
 * rotation (http/routes/tool-results.ts).
 *
 * `If-Match: "<version>"` (or `*`: the tool exists) makes a PUT or DELETE conditional: 412
 * `precondition_failed` otherwise. A body that is not JSON is 400 (`invalid_body`, `invalid_json`, 415);
 * a JSON body that is not a valid definition, and a name a PUT may not use, are 422 `invalid_tool`
 * naming the field (`name`, `description`, `parameters`, `handler.url`, `handler.timeoutMs`,
 * `approvalTimeoutMs`, ...). Every refusal is decided before anything is written.
 */
import { Hono } from "hono";
import { z } from "zod";
import { compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";
import { toolDefinitionBody, toolName, withToolDefaults, type ToolSecretRotatedResponse } from "../../../api/tools.js";
import { masterSecret, toolSecret } from "../../crypto/webhooks.js";
import { hostClock } from "../../platform/host-config.js";
import type { CatalogRecord, ToolDefinition } from "../../../kinds/catalog-types.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub, type IfMatch } from "../../directory/object.js";
import { isDevelopment, type Env } from "../../env.js";
import { builtinTools } from "../../session/kinds.js";
import { Problem } from "../../problems.js";
import { noQuery, parse } from "../../schemas.js";
import { body, query, type AppContext } from "./shared.js";

const BUILTIN_NAMES = new Set(builtinTools.map((tool) => tool.name));

/** How long the secret before a rotation still verifies late results: 7 days, the longest an HTTP tool's call waits. */
export const TOOL_SECRET_OVERLAP_MS = 7 * 86_400_000;

function catalog(c: AppContext): ReturnType<typeof directoryStub> {
  return directoryStub(c.env, c.get("claims").tenant);
}

/** The `:tool` of a read or delete: a name no PUT accepts names no tool. */
function nameParam(c: AppContext): string {
  const name = c.req.param("tool") ?? "";
  if (!toolName.safeParse(name).success || BUILTIN_NAMES.has(name)) throw notFound(name);
  return name;
}

/** The `:tool` a PUT defines: the provider-safe rule, no `__`, not a built-in tool's name. */
function definedName(c: AppContext): string {
  const name = parse(toolName, c.req.param("tool") ?? "", "invalid_tool", "name");
  if (BUILTIN_NAMES.has(name))
    throw new Problem(
      "invalid_tool",
      `name: ${name} is a built-in tool (built-in: ${[...BUILTIN_NAMES].join(", ")})`,
      "name",
    );
  return name;
}

function notFound(name: string): Problem {
  return new Problem("tool_not_found", `the catalog has no tool ${JSON.stringify(name)}`);
}

/** `If-Match`: one ETag this server sent (`"<version>"`), or `*`. */
function ifMatch(c: AppContext): IfMatch | undefined {
  const header = c.req.header("if-match");
  if (header === undefined) return undefined;
  if (header.trim() === "*") return "*";
  const match = /^"([1-9][0-9]{0,15})"$/.exec(header.trim());
  if (match === null)
    throw new Problem("invalid_header", 'If-Match is a tool ETag this server sent ("<version>") or *', "if-match");
  return Number(match[1]);
}

function precondition(name: string, current: number | undefined): Problem {
  return new Problem(
    "precondition_failed",
    current === undefined
      ? `If-Match: the catalog has no tool ${JSON.stringify(name)}`
      : `If-Match: tool ${name} is at version ${current}`,
    "if-match",
  );
}

/**
 * The checks a schema cannot make: plain `http:` only where ENVIRONMENT is development (`npm start`),
 * and `parameters` must compile with the validator calls are checked with (pi-schema, without code
 * generation); a `$ref` that names nothing is refused here, though a call would only reject its value.
 */
export function checkDefinition(env: Env, definition: ToolDefinition): void {
  const handler = definition.handler;
  if (handler.type === "http" && new URL(handler.url).protocol !== "https:" && !isDevelopment(env.ENVIRONMENT)) {
    throw new Problem(
      "invalid_tool",
      "handler.url: an https: URL (plain http: only where ENVIRONMENT is development)",
      "handler.url",
    );
  }
  try {
    compile(definition.parameters, { formats, coerce: true });
  } catch (error) {
    throw new Problem(
      "invalid_tool",
      `parameters: the schema does not compile: ${error instanceof Error ? error.message : String(error)}`,
      "parameters",
    );
  }
}

function recordResponse(c: AppContext, record: CatalogRecord, status: 200 | 201 = 200): Response {
  c.header("ETag", `"${record.version}"`);
  return c.json(record, status);
}

export const toolRoutes = new Hono<AppEnv>();

toolRoutes.put("/:tool", requires("tools"), async (c) => {
  query(c, noQuery);
  const name = definedName(c);
  const condition = ifMatch(c);
  const definition = withToolDefaults(parse(toolDefinitionBody, await body(c, z.unknown()), "invalid_tool"));
  checkDefinition(c.env, definition);
  // Derivable before anything is written: a deployment without the master secret refuses the PUT, writing nothing.
  const master = definition.handler.type === "http" ? masterSecret(c.env) : undefined;
  const outcome = await catalog(c).putTool(name, definition, condition);
  switch (outcome.type) {
    case "stored": {
      const handler = outcome.record.definition?.handler;
      if (!outcome.firstSecret || master === undefined || handler?.type !== "http")
        return recordResponse(c, outcome.record, outcome.created ? 201 : 200);
      const secret = await toolSecret(master, c.get("claims").tenant, name, handler.secretGeneration ?? 1);
      const answer = { ...outcome.record, secret };
      c.header("ETag", `"${outcome.record.version}"`);
      return c.json(answer, outcome.created ? 201 : 200);
    }
    case "precondition":
      throw precondition(name, outcome.current);
    case "too_large":
      throw new Problem(
        "invalid_tool",
        `the definition is ${outcome.bytes} bytes of JSON; at most ${outcome.limit}`,
        "parameters",
      );
    case "too_many":
      throw new Problem("invalid_tool", `the catalog holds at most ${outcome.limit} tools; delete one first`, "name");
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

toolRoutes.post("/:tool/rotate-secret", requires("tools"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const master = masterSecret(c.env);
  const previousUntil = hostClock().now() + TOOL_SECRET_OVERLAP_MS;
  const outcome = await catalog(c).rotateToolSecret(name, previousUntil);
  switch (outcome.type) {
    case "rotated": {
      const answer: ToolSecretRotatedResponse = {
        name,
        version: outcome.version,
        secretGeneration: outcome.generation,
        secret: await toolSecret(master, c.get("claims").tenant, name, outcome.generation),
        previousSecretExpiresAt: new Date(outcome.previousUntil).toISOString(),
      };
      c.header("ETag", `"${outcome.version}"`);
      return c.json(answer);
    }
    case "not_found":
      throw notFound(name);
    case "not_http":
      throw new Problem("conflict", `tool ${name} is a client tool: it has no signing secret`, "name");
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

toolRoutes.get("/", requires("tools"), async (c) => {
  query(c, noQuery);
  const { version, items } = await catalog(c).listTools();
  c.header("ETag", `"${version}"`);
  return c.json({ items });
});

toolRoutes.get("/:tool", requires("tools"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const record = await catalog(c).getTool(name);
  if (record === undefined) throw notFound(name);
  return recordResponse(c, record);
});

toolRoutes.delete("/:tool", requires("tools"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const outcome = await catalog(c).deleteTool(name, ifMatch(c));
  switch (outcome.type) {
    case "deleted":
      c.header("ETag", `"${outcome.version}"`);
      return c.json({ name: outcome.name, deleted: true as const, version: outcome.version });
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
