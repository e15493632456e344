/**
 * The HTTP API (DESIGN §6, issue 6): a Hono app mounted by the Worker's fetch (src/worker/index.ts).
 * Versioned under /v1; every error is RFC 9457 problem+json with a stable `code` (problems.ts); bodies
 * over MAX_BODY_BYTES are refused with 413 before they are read. Route modules:
 *
 *   routes/sessions.ts       PUT/GET/DELETE session, inputs, acceptances, usage, tasks, operator routes
 *   routes/conversations.ts  accept, snapshot, entries, abort, fork, collapse, reset, config
 *   routes/watch.ts          SSE / WebSocket watch of a conversation or the session
 *   routes/webhooks.ts       signed webhooks (no bearer token)
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppEnv } from "./auth.js";
import { hostReport } from "./host-config.js";
import { Problem, toProblem } from "./problems.js";
import { conversationRoutes } from "./routes/conversations.js";
import { scheduleRoutes } from "./routes/schedules.js";
import { sessionRoutes } from "./routes/sessions.js";
import { watchRoutes } from "./routes/watch.js";
import { webhookRoutes } from "./routes/webhooks.js";
import { MAX_BODY_BYTES } from "./schemas.js";

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.get("/health", (c) => c.text("ok"));

  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => new Problem("payload_too_large", `bodies are limited to ${MAX_BODY_BYTES} bytes`).response(),
    }),
  );

  // Watch routes first: they share the `/:session/...` prefix with the others.
  app.route("/v1/sessions", watchRoutes);
  app.route("/v1/sessions", conversationRoutes);
  app.route("/v1/sessions", scheduleRoutes);
  app.route("/v1/sessions", sessionRoutes);
  app.route("/v1/webhooks", webhookRoutes);

  app.notFound((c) => new Problem("route_not_found", `no route ${c.req.method} ${new URL(c.req.url).pathname}`).response());
  app.onError((error, c) => toProblem(error, (report) => hostReport({ type: "harness", report })).response(new URL(c.req.url).pathname));
  return app;
}

export const app = createApp();
