/**
 * The OpenAPI 3.1 document of the HTTP API (docs/api.md), generated from the wire schemas (src/api/schemas.ts,
 * src/api/responses.ts, src/api/problems.ts) with zod's JSON Schema output (draft 2020-12, the dialect
 * of OpenAPI 3.1). Served at `GET /v1/openapi.json`.
 *
 * A route is ONE declaration in `API_ROUTES`; the document is built from the table. The declarations live
 * by route group (src/api/openapi-sessions.ts, -watch, -tools, -integrations, -users, -rig, written with
 * src/api/openapi-route.ts); this module assembles them in the document's order, with the path parameters
 * and the document builder. A test compares the table with the routes the Hono app registers, both ways,
 * so a route added to the app without a declaration (or declared but not served) fails the build's tests.
 */
import { z } from "zod";
import { PROBLEM_CODES, STATUS, problemBody } from "./problems.js";
import { conversationRef, idString, requestKey, sessionName, tenantName } from "./schemas.js";
import { inboundName } from "./inbound.js";
import { pendingIdParam } from "./pending.js";
import { endpointId } from "./webhook-endpoints.js";
import { toolName } from "./tools.js";
import { issuerName } from "./issuers.js";
import { mcpServerName } from "./mcp-servers.js";
import { erasureId, templateName, userSub } from "./templates.js";
import { profileName } from "./profiles.js";
import { agentId } from "./rig.js";
import { jsonValue } from "./responses.js";
import { ok, type ApiRoute, type RouteAuth, type RouteResponse } from "./openapi-route.js";
import {
  CONVERSATION_ROUTES,
  INPUT_ROUTES,
  MODEL_ROUTES,
  OPERATOR_ROUTES,
  SCHEDULE_ROUTES,
  SESSION_ROUTES,
  WAITING_INPUT_ROUTES,
} from "./openapi-sessions.js";
import { WATCH_ROUTES } from "./openapi-watch.js";
import { CHAT_ROUTES } from "./openapi-chat.js";
import { AG_UI_ROUTES } from "./openapi-ag-ui.js";
import {
  EVENTS_OUT_ROUTES,
  INBOUND_ROUTES,
  TENANT_INBOUND_ROUTES,
  WEBHOOK_INPUT_ROUTES,
} from "./openapi-integrations.js";
import {
  MCP_SERVER_ROUTES,
  PENDING_ROUTES,
  SESSION_MCP_ROUTES,
  TOOL_CATALOG_ROUTES,
  TOOL_RESULT_ROUTES,
} from "./openapi-tools.js";
import { apiKeyId } from "./api-keys.js";
import { API_KEY_ROUTES, ISSUER_ROUTES, LIMITS_ROUTES, PROFILE_ROUTES, TEMPLATE_ROUTES } from "./openapi-users.js";
import { RIG_ROUTES } from "./openapi-rig.js";

/** Path parameters by name: their schemas (every `{name}` in a path must be listed). */
export const PATH_PARAMETERS: Readonly<Record<string, z.ZodType>> = {
  session: sessionName,
  conversation: conversationRef,
  inputId: idString,
  taskId: idString,
  requestKey,
  tenant: tenantName,
  scheduleId: idString,
  agentId,
  mailId: idString,
  name: inboundName,
  issuer: issuerName,
  key: apiKeyId,
  pendingId: pendingIdParam,
  endpointId,
  deliveryId: z.string().describe("{event element}.{endpoint id}"),
  tool: toolName,
  server: mcpServerName,
  template: templateName,
  profile: profileName,
  sub: userSub,
  erasure: erasureId,
  file: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}\.json$/, "{agent_id}.json"),
};

/**
 * Every route of the API, in the document's order (its paths and their methods appear in this order).
 * Add a route to its group (src/api/openapi-*.ts) when you add it to the app (a test enforces both ways);
 * a new group is spread here.
 */
export const API_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: "/health",
    operationId: "health",
    summary: "Liveness",
    auth: { type: "none" },
    responses: { 200: { description: "ok", text: true } },
  },
  {
    method: "get",
    path: "/v1/openapi.json",
    operationId: "openapi",
    summary: "This document",
    auth: { type: "none" },
    responses: { 200: ok(z.record(z.string(), jsonValue), "The OpenAPI 3.1 document") },
  },
  ...SESSION_ROUTES,
  ...INPUT_ROUTES,
  ...CONVERSATION_ROUTES,
  ...WATCH_ROUTES,
  ...OPERATOR_ROUTES,
  ...WEBHOOK_INPUT_ROUTES,
  ...TOOL_RESULT_ROUTES,
  ...INBOUND_ROUTES,
  ...TENANT_INBOUND_ROUTES,
  ...PENDING_ROUTES,
  ...CHAT_ROUTES,
  ...AG_UI_ROUTES,
  ...SESSION_MCP_ROUTES,
  ...EVENTS_OUT_ROUTES,
  ...TOOL_CATALOG_ROUTES,
  ...ISSUER_ROUTES,
  ...API_KEY_ROUTES,
  ...LIMITS_ROUTES,
  ...MCP_SERVER_ROUTES,
  ...TEMPLATE_ROUTES,
  ...PROFILE_ROUTES,
  ...MODEL_ROUTES,
  ...WAITING_INPUT_ROUTES,
  ...SCHEDULE_ROUTES,
  ...RIG_ROUTES,
];

type JsonSchema = Record<string, unknown>;

function schemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: "any",
    target: "draft-2020-12",
  }) as JsonSchema;
  return rest;
}

function parametersOf(route: ApiRoute): JsonSchema[] {
  const out: JsonSchema[] = [];
  for (const match of route.path.matchAll(/\{([A-Za-z]+)\}/g)) {
    const name = match[1] ?? "";
    const schema = PATH_PARAMETERS[name];
    if (schema === undefined)
      throw new Error(`path parameter {${name}} of ${route.path} has no schema in PATH_PARAMETERS`);
    out.push({ name, in: "path", required: true, schema: schemaOf(schema, "input") });
  }
  if (route.query !== undefined) {
    const object = schemaOf(route.query, "input");
    const properties = (object["properties"] ?? {}) as Record<string, JsonSchema>;
    const required = new Set((object["required"] ?? []) as string[]);
    for (const [name, schema] of Object.entries(properties))
      out.push({ name, in: "query", required: required.has(name), schema });
  }
  for (const [name, header] of Object.entries(route.headers ?? {}))
    out.push({
      name,
      in: "header",
      required: header.required ?? route.auth.type === "webhook",
      description: header.description,
      schema: schemaOf(header.schema, "input"),
    });
  return out;
}

function securityOf(auth: RouteAuth): JsonSchema[] {
  switch (auth.type) {
    case "bearer":
      return [{ bearer: [] }];
    case "watch":
      return [{ bearer: [] }, { watchToken: [] }];
    case "webhook":
    case "none":
      return [];
    default: {
      const never: never = auth;
      return never;
    }
  }
}

function responseOf(response: RouteResponse): JsonSchema {
  if ("json" in response)
    return {
      description: response.description,
      content: { "application/json": { schema: schemaOf(response.json, "output") } },
    };
  if ("stream" in response)
    return { description: response.description, content: { [response.stream]: { schema: { type: "string" } } } };
  return { description: response.description, content: { "text/plain": { schema: { type: "string" } } } };
}

/** The problem statuses every route may answer, by status. */
function problemResponses(): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  const statuses = [...new Set(PROBLEM_CODES.map((code) => STATUS[code]))].sort((a, b) => a - b);
  for (const status of statuses) {
    const codes = PROBLEM_CODES.filter((code) => STATUS[code] === status);
    out[String(status)] = {
      description: `Problem (${codes.join(", ")})`,
      content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
    };
  }
  return out;
}

/** The OpenAPI 3.1 document of `routes` (default: every route of the API). */
export function openApiDocument(routes: readonly ApiRoute[] = API_ROUTES): JsonSchema {
  const problems = problemResponses();
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const responses: Record<string, JsonSchema> = {};
    for (const [status, response] of Object.entries(route.responses)) responses[status] = responseOf(response);
    for (const [status, problem] of Object.entries(problems))
      if (responses[status] === undefined) responses[status] = problem;
    const operation: JsonSchema = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.auth.type === "bearer"
        ? { description: `Needs a token whose role grants \`${route.auth.capability}\`.` }
        : {}),
      security: securityOf(route.auth),
      parameters: parametersOf(route),
      ...(route.body === undefined
        ? {}
        : {
            requestBody: {
              required: route.body.required,
              content: { "application/json": { schema: schemaOf(route.body.schema, "input") } },
            },
          }),
      responses,
    };
    (paths[route.path] ??= {})[route.method] = operation;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "pico-edge",
      version: "1",
      description:
        "Durable agent sessions (pico v3) on Cloudflare Workers. Errors are RFC 9457 problem+json with a stable code.",
    },
    servers: [{ url: "/" }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "HS256 JWT with tenant, role and exp (lifetime at most TOKEN_MAX_LIFETIME_SECONDS); agent tokens also carry agent (the agent id) and sessions (the session names they may act in; 401 on any other session)",
        },
        watchToken: {
          type: "apiKey",
          in: "query",
          name: "access_token",
          description:
            "A watch token from POST .../watch-token (watch routes only; a normal bearer token in a URL is refused)",
        },
      },
      schemas: { Problem: schemaOf(problemBody, "output") },
    },
  };
}
