/**
 * The HTTP API (docs/api.md): a Hono app mounted by the Worker's fetch (src/worker/index.ts).
 * Versioned under /v1; every error is RFC 9457 problem+json with a stable `code` (problems.ts); bodies
 * over MAX_BODY_BYTES are refused with 413 before they are read. Route modules:
 *
 *   http/routes/sessions.ts       PUT/POST/GET/DELETE session, inputs, acceptances, usage, tasks, operator routes
 *   http/routes/conversations.ts  accept, snapshot, entries, abort, fork, collapse, reset, config
 *   http/routes/watch.ts          SSE / WebSocket watch of a conversation or the session
 *   http/routes/webhooks.ts       signed webhooks (no bearer token)
 *   http/routes/tool-results.ts   an HTTP tool's late result, signed with the tool's secret (no bearer token)
 *   http/routes/inbound.ts        inbound endpoints: their config (operator), and deliveries in GitHub, Slack, Stripe
 *   or Standard Webhooks format (no bearer token)
 *   http/routes/inbound-endpoints.ts  the tenant's inbound endpoints, routed per thread (operator), and their deliveries
 *   http/routes/pending.ts        the pending list: approvals and client tools waiting for an answer
 *   http/routes/webhook-endpoints.ts  events out: the tenant's webhook endpoints and a session's deliveries (operator)
 *   http/routes/rig.ts            the rig: agents, hooks, mail, nudges, witness, health, .chipset/state
 *   http/routes/tools.ts          the tenant's tool catalog (operator)
 *   http/routes/issuers.ts        the tenant's identity providers (operator)
 *   http/routes/limits.ts         the tenant's limits (operator) and usage (operator; a user's own)
 *   http/routes/tokens.ts         minting end users' tokens (operator; docs/users.md)
 *   http/routes/api-keys.ts       the tenant's API keys: long-lived, revocable credentials (operator; docs/users.md)
 *   http/routes/mcp-servers.ts    the tenant's remote MCP servers as tool sources (operator)
 *   http/routes/templates.ts      session templates and user revocation (operator; docs/users.md)
 *   http/routes/mcp.ts            the session as an MCP server (streamable HTTP, JSON responses, stateless)
 *   GET /v1/models           the models this deployment can use (platform/models.ts)
 *
 * `GET /v1/openapi.json` serves the document generated from the wire schemas (src/api/openapi.ts); every
 * route added here needs its one declaration in API_ROUTES (test/workerd/http-openapi.test.ts).
 */
import { Hono } from "hono";
import { openApiDocument } from "../../api/openapi.js";
import { bodyLimit } from "hono/body-limit";
import { requires, type AppEnv } from "../identity/auth.js";
import { listModels } from "../platform/models.js";
import { corsMiddleware } from "./cors.js";
import { hostReport } from "../platform/host-config.js";
import { requestLog } from "./request-log.js";
import { refusePublicSecrets } from "./refuse-public-secrets.js";
import { Problem, toProblem } from "../problems.js";
import { conversationRoutes } from "./routes/conversations.js";
import { scheduleRoutes } from "./routes/schedules.js";
import { rigRoutes } from "./routes/rig.js";
import { sessionRoutes } from "./routes/sessions.js";
import { watchRoutes } from "./routes/watch.js";
import { chatRoutes } from "./routes/chat.js";
import { webhookRoutes } from "./routes/webhooks.js";
import { toolResultRoutes } from "./routes/tool-results.js";
import { inboundDeliveryRoutes, inboundRoutes } from "./routes/inbound.js";
import { inboundEndpointRoutes, tenantInboundDeliveryRoutes } from "./routes/inbound-endpoints.js";
import { pendingRoutes } from "./routes/pending.js";
import { agUiRoutes } from "./routes/ag-ui.js";
import { deliveryRoutes, webhookEndpointRoutes } from "./routes/webhook-endpoints.js";
import { toolRoutes } from "./routes/tools.js";
import { issuerRoutes } from "./routes/issuers.js";
import { limitRoutes } from "./routes/limits.js";
import { statsRoutes } from "./routes/stats.js";
import { tokenRoutes } from "./routes/tokens.js";
import { apiKeyRoutes } from "./routes/api-keys.js";
import { mcpServerRoutes } from "./routes/mcp-servers.js";
import { erasureRoutes, templateRoutes, userRoutes } from "./routes/templates.js";
import { retentionRoutes } from "./routes/retention.js";
import { profileRoutes } from "./routes/profiles.js";
import { mcpRoutes } from "./routes/mcp.js";
import { isImport, transferRoutes } from "./routes/transfer.js";
import { MAX_BODY_BYTES } from "../schemas.js";

/** The body limit of `POST .../chat` and `POST .../ag-ui` (8 MiB): a page's whole history. */
const MAX_FRONTEND_BODY_BYTES = 8 * 1024 * 1024;

/** `POST /v1/sessions/{session}/chat` or `.../ag-ui`. */
function isFrontendPost(method: string, path: string): boolean {
  return method === "POST" && /^\/v1\/sessions\/[^/]+\/(chat|ag-ui)$/.test(path);
}

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use("*", requestLog());
  // Outside development, nothing is served while a secret holds a public development value.
  app.use("*", refusePublicSecrets());
  // CORS before the routes, so preflights and refused origins never reach one.
  app.use("*", corsMiddleware());

  app.get("/health", (c) => c.text("ok"));
  let document: ReturnType<typeof openApiDocument> | undefined;
  app.get("/v1/openapi.json", (c) => c.json((document ??= openApiDocument())));

  const limitBody = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => new Problem("payload_too_large", `bodies are limited to ${MAX_BODY_BYTES} bytes`).response(),
  });
  // A chat or AG-UI page resends its whole history with every message: those bodies may be larger.
  const limitFrontendBody = bodyLimit({
    maxSize: MAX_FRONTEND_BODY_BYTES,
    onError: () =>
      new Problem(
        "payload_too_large",
        `chat and AG-UI bodies are limited to ${MAX_FRONTEND_BODY_BYTES} bytes`,
      ).response(),
  });
  // An import streams its body to the session object, which enforces MAX_IMPORT_BYTES (routes/transfer.ts).
  app.use("/v1/*", (c, next) =>
    isImport(c.req.method, c.req.path)
      ? next()
      : isFrontendPost(c.req.method, c.req.path)
        ? limitFrontendBody(c, next)
        : limitBody(c, next),
  );

  // What this deployment can use (the echo models, each enabled catalogue provider, custom endpoints):
  // the config capability, since these are the values a config may name.
  app.get("/v1/models", requires("config"), async (c) => {
    if (Object.keys(c.req.queries()).length > 0)
      throw new Problem("invalid_query", "this route takes no query parameters");
    return c.json(await listModels(c.env));
  });

  // Watch routes first: they share the `/:session/...` prefix with the others.
  app.route("/v1/sessions", watchRoutes);
  app.route("/v1/sessions", rigRoutes);
  app.route("/v1/sessions", conversationRoutes);
  app.route("/v1/sessions", scheduleRoutes);
  app.route("/v1/sessions", inboundRoutes);
  app.route("/v1/sessions", pendingRoutes);
  app.route("/v1/sessions", chatRoutes);
  app.route("/v1/sessions", agUiRoutes);
  app.route("/v1/sessions", deliveryRoutes);
  // Its tools call the routes of this app with the caller's token.
  app.route(
    "/v1/sessions",
    mcpRoutes((request, env, ctx) => app.fetch(request, env, ctx)),
  );
  app.route("/v1/sessions", transferRoutes);
  app.route("/v1/sessions", sessionRoutes);
  app.route("/v1/webhooks", webhookRoutes);
  app.route("/v1/tool-results", toolResultRoutes);
  app.route("/v1/inbound", inboundDeliveryRoutes);
  app.route("/v1/inbound", tenantInboundDeliveryRoutes);
  app.route("/v1/inbound-endpoints", inboundEndpointRoutes);
  app.route("/v1/webhook-endpoints", webhookEndpointRoutes);
  app.route("/v1/tools", toolRoutes);
  app.route("/v1/issuers", issuerRoutes);
  app.route("/v1", limitRoutes);
  app.route("/v1", statsRoutes);
  app.route("/v1/tokens", tokenRoutes);
  app.route("/v1/api-keys", apiKeyRoutes);
  app.route("/v1/mcp-servers", mcpServerRoutes);
  app.route("/v1/templates", templateRoutes);
  app.route("/v1/retention", retentionRoutes);
  app.route("/v1/profiles", profileRoutes);
  app.route("/v1/users", userRoutes);
  app.route("/v1/erasures", erasureRoutes);

  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    const allow = allowedMethods(app, path);
    if (allow.length > 0) {
      const response = new Problem(
        "method_not_allowed",
        `${c.req.method} is not allowed on ${path}; allowed: ${allow.join(", ")}`,
      ).response();
      response.headers.set("allow", allow.join(", "));
      return response;
    }
    return new Problem("route_not_found", `no route ${c.req.method} ${path}`).response();
  });
  app.onError((error, c) =>
    toProblem(error, (report) => hostReport({ type: "harness", report })).response(new URL(c.req.url).pathname),
  );
  return app;
}

/** Methods with routes: what the app registered, minus middleware (`ALL`) and CORS preflight. */
export function servedRoutes(app: Hono<AppEnv>): readonly { readonly method: string; readonly path: string }[] {
  const seen = new Set<string>();
  const out: { method: string; path: string }[] = [];
  for (const route of app.routes) {
    if (route.method === "ALL" || route.method === "OPTIONS") continue;
    const key = `${route.method} ${route.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ method: route.method, path: route.path });
  }
  return out;
}

function pattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}$`);
}

/** The methods the app serves on `path` (sorted): a non-empty list makes a miss 405, not 404. */
export function allowedMethods(app: Hono<AppEnv>, path: string): readonly string[] {
  const methods = new Set<string>();
  for (const route of servedRoutes(app)) if (pattern(route.path).test(path)) methods.add(route.method);
  return [...methods].sort();
}

export const app = createApp();
