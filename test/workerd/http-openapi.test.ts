/**
 * The OpenAPI document (issue 14): served at GET /v1/openapi.json, generated from the wire schemas, and
 * in step with the app both ways, enumerated mechanically from the routes Hono registered (so a route
 * added later without its declaration fails here). The document's validity against the OpenAPI 3.1
 * schema is checked in Node (test/node/openapi.test.ts), where the validator runs.
 */
import { describe, expect, it } from "vitest";
import { API_ROUTES, openApiDocument } from "../../src/api/openapi.js";
import { app, servedRoutes } from "../../src/worker/app.js";
import { call, json } from "./http-fixtures.js";

/** `/v1/sessions/:session/inputs/:inputId` -> `/v1/sessions/{session}/inputs/{inputId}`. */
function template(path: string): string {
  return path.replace(/:([A-Za-z]+)/g, "{$1}");
}

describe("OpenAPI", () => {
  it("every route the app serves is in the document and every documented route is served", () => {
    const served = servedRoutes(app).map((route) => `${route.method} ${template(route.path)}`).sort();
    const documented: string[] = [];
    const paths = openApiDocument()["paths"] as Record<string, Record<string, unknown>>;
    for (const [path, operations] of Object.entries(paths)) for (const method of Object.keys(operations)) documented.push(`${method.toUpperCase()} ${path}`);
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
    const accept = (document["paths"] as Record<string, Record<string, { responses: Record<string, unknown> }>>)["/v1/sessions/{session}/conversations/{conversation}/inputs"]?.["post"];
    expect(Object.keys(accept?.responses ?? {})).toEqual(expect.arrayContaining(["200", "201", "400", "401", "403", "404", "409", "413", "422"]));
  });
});
