/**
 * The OpenAPI document: served at GET /v1/openapi.json, generated from the wire schemas, and
 * in step with the app both ways, enumerated mechanically from the routes Hono registered (so a route
 * added later without its declaration fails here). The document's validity against the OpenAPI 3.1
 * schema is checked in Node (test/node/openapi.test.ts), where the validator runs.
 */
import { describe, expect, it } from "vitest";
import { API_ROUTES, openApiDocument } from "../../src/api/openapi.js";
import { app, servedRoutes } from "../../src/worker/http/app.js";
import { DeliveriesClient, WebhookEndpointsClient } from "../../src/client/webhook-endpoints.js";
import { CLIENT_EXCLUDED_OPERATIONS, CLIENT_OPERATIONS, PicoClient, SessionClient } from "../../src/client/client.js";
import { ConversationClient } from "../../src/client/conversation.js";
import { RigClient } from "../../src/client/rig.js";
import { InboundClient } from "../../src/client/inbound.js";
import { ToolsClient } from "../../src/client/tools.js";
import { IssuersClient } from "../../src/client/issuers.js";
import { ApiKeysClient } from "../../src/client/api-keys.js";
import { InboundEndpointsClient } from "../../src/client/inbound-endpoints.js";
import { LimitsClient } from "../../src/client/limits.js";
import { EndUserClient } from "../../src/client/end-users.js";
import { McpServersClient } from "../../src/client/mcp-servers.js";
import { UsersClient } from "../../src/client/users.js";
import { sessionMetaResponse, sessionsPage } from "../../src/api/responses.js";
import { call, client, json, uniqueSession } from "./http-fixtures.js";

/** `/v1/sessions/:session/inputs/:inputId` -> `/v1/sessions/{session}/inputs/{inputId}`. */
function template(path: string): string {
  return path.replace(/:([A-Za-z]+)/g, "{$1}");
}

describe("OpenAPI", () => {
  it("every route the app serves is in the document and every documented route is served", () => {
    const served = servedRoutes(app)
      .map((route) => `${route.method} ${template(route.path)}`)
      .sort();
    const documented: string[] = [];
    const paths = openApiDocument()["paths"] as Record<string, Record<string, unknown>>;
    for (const [path, operations] of Object.entries(paths))
      for (const method of Object.keys(operations)) documented.push(`${method.toUpperCase()} ${path}`);
    documented.sort();
    expect(served.length).toBeGreaterThan(20);
    expect(served.filter((route) => !documented.includes(route))).toEqual([]);
    expect(documented.filter((route) => !served.includes(route))).toEqual([]);
    expect(new Set(API_ROUTES.map((route) => route.operationId)).size).toBe(API_ROUTES.length);
  });

  it("GET /v1/openapi.json serves the generated document without a token", async () => {
    const response = await call("GET", "/v1/openapi.json");
    expect(response.status).toBe(200);
    const document = await json(response);
    expect(document).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
    expect(document["openapi"]).toBe("3.1.0");
    const components = document["components"] as { securitySchemes: Record<string, unknown> };
    expect(Object.keys(components.securitySchemes).sort()).toEqual(["bearer", "watchToken"]);
    const accept = (document["paths"] as Record<string, Record<string, { responses: Record<string, unknown> }>>)[
      "/v1/sessions/{session}/conversations/{conversation}/inputs"
    ]?.["post"];
    expect(Object.keys(accept?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "201", "400", "401", "403", "404", "409", "413", "422"]),
    );
  });

  it("every API route has a typed-client method or a documented exclusion, and each named method exists", () => {
    const classes: Record<string, { prototype: object }> = {
      PicoClient,
      SessionClient,
      ConversationClient,
      RigClient,
      InboundClient,
      ToolsClient,
      WebhookEndpointsClient,
      DeliveriesClient,
      McpServersClient,
      LimitsClient,
      EndUserClient,
      UsersClient,
      IssuersClient,
      ApiKeysClient,
      InboundEndpointsClient,
    };
    for (const route of API_ROUTES) {
      const method = CLIENT_OPERATIONS[route.operationId];
      const excluded = CLIENT_EXCLUDED_OPERATIONS[route.operationId];
      expect(method === undefined ? excluded : method, route.operationId).toBeTypeOf("string");
      expect(method !== undefined && excluded !== undefined, `${route.operationId} is both covered and excluded`).toBe(
        false,
      );
      if (method === undefined) continue;
      const [owner, name] = method.split(".");
      const prototype = classes[owner ?? ""]?.prototype as Record<string, unknown> | undefined;
      expect(typeof prototype?.[name ?? ""], method).toBe("function");
    }
    // What stays outside the client, and why (the reasons live beside the list in src/client/client.ts):
    // health (a load balancer's liveness probe), openapi (the description tools read), webhook,
    // inboundDelivery, tenantInboundDelivery and toolResult (authenticated by the sender's signature, never a bearer token),
    // mcp (spoken by an MCP client), chat and chatResume (spoken by the AI SDK's DefaultChatTransport),
    // runAgUi (spoken by an AG-UI client).
    expect(Object.keys(CLIENT_EXCLUDED_OPERATIONS).sort()).toEqual([
      "chat",
      "chatResume",
      "health",
      "inboundDelivery",
      "mcp",
      "openapi",
      "runAgUi",
      "tenantInboundDelivery",
      "toolResult",
      "webhook",
    ]);
    const operations = new Set(API_ROUTES.map((route) => route.operationId));
    for (const id of [...Object.keys(CLIENT_OPERATIONS), ...Object.keys(CLIENT_EXCLUDED_OPERATIONS)])
      expect(operations.has(id), id).toBe(true);
  });

  it("the client's directory methods answer bodies that match their response schemas", async () => {
    const api = await client("client-directory");
    const name = uniqueSession("client-dir");
    await api.session(name).create({ title: "Before" });
    const meta = await api.session(name).patch({ title: "After", labels: ["x"] });
    expect(sessionMetaResponse.parse(meta)).toMatchObject({ session: name, title: "After", labels: ["x"] });
    const page = sessionsPage.parse(await api.sessions({ q: name }));
    expect(page.items.map((row) => row.session)).toEqual([name]);
  });
});
