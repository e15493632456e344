/**
 * A tenant's remote MCP servers as tool sources over HTTP (docs/mcp.md "MCP servers as tool sources"):
 * registration against real SDK MCP servers (mcp-fixtures.ts, served through the host fetch seam),
 * header values that never come back, every refusal naming its field and writing nothing, the pinned
 * snapshot and its hash, and sessions selecting `{server}__{tool}` like catalog tools.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { app } from "../../src/worker/http/app.js";
import type { Env } from "../../src/worker/env.js";
import { DirectoryObject, directoryStub } from "../../src/worker/directory/object.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { setLogLevel } from "../../src/worker/log.js";
import { mcpEndpoint } from "../../src/worker/remote/mcp-servers.js";
import { McpServersClient } from "../../src/client/mcp-servers.js";
import type { McpServerResponse } from "../../src/api/mcp-servers.js";
import { BASE, call, client, json, token, uniqueSession } from "./http-fixtures.js";
import { McpTestServer, mcpFetch, type McpTestTool } from "./mcp-fixtures.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";

const workerEnv = env as unknown as Env;

let counter = 0;
/** A tenant (and a server name) of its own per test. */
function fresh(label: string): string {
  counter += 1;
  return `mcp-${label}-${counter}-${Date.now().toString(36)}`;
}

const search: McpTestTool = {
  name: "search_issues",
  description: "Search the issues of a repository",
  inputSchema: { properties: { query: { type: "string" } }, required: ["query"] },
  annotations: { readOnlyHint: true, idempotentHint: true },
};

afterEach(() => {
  setHostSeams({});
  setLogLevel("quiet");
  vi.restoreAllMocks();
});

async function operator(tenant: string): Promise<string> {
  return token(tenant, "operator");
}

async function putServer(tenant: string, name: string, body: unknown): Promise<Response> {
  return call("PUT", `/v1/mcp-servers/${name}`, { token: await operator(tenant), body });
}

async function createSession(tenant: string, name: string, selectedTools: readonly string[]): Promise<Response> {
  return call("PUT", `/v1/sessions/${name}`, { token: await token(tenant, "client"), body: { selectedTools } });
}

async function say(tenant: string, session: string, input: string): Promise<void> {
  const response = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
    token: await token(tenant, "client"),
    body: { input },
  });
  expect(response.status).toBe(201);
  expect((await json<{ status: string }>(response)).status).toBe("done");
}

/** Every entry of the root conversation as text (what the model was offered is in its system entries). */
async function transcript(tenant: string, session: string): Promise<string> {
  return JSON.stringify(
    await json(
      await call("GET", `/v1/sessions/${session}/conversations/root/entries?limit=1000`, {
        token: await token(tenant, "client"),
      }),
    ),
  );
}

/**
 * A real SDK server whose `tools/list` answers `perPage` tools a page, `pages` pages (`Infinity`: the
 * cursor never ends); the test server of mcp-fixtures.ts lists everything on one page.
 */
function pagingServer(pages: number, perPage: number): (request: Request) => Promise<Response> {
  return async (request) => {
    const server = new Server(
      { name: "paging", version: "1.0.0" },
      { capabilities: { tools: {} }, jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    server.setRequestHandler(ListToolsRequestSchema, (list) => {
      const page = Number(list.params?.cursor ?? "0");
      const tools = Array.from({ length: perPage }, (_, i) => ({
        name: `t${page}_${i}`,
        inputSchema: { type: "object" as const },
      }));
      return { tools, ...(page + 1 < pages ? { nextCursor: String(page + 1) } : {}) };
    });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await server.connect(transport);
    return transport.handleRequest(request);
  };
}

/** The tenant's catalog records as sessions read them (MCP tools included). */
async function catalogOf(tenant: string): Promise<{ version: number; names: Map<string, boolean> }> {
  const snapshot = await directoryStub(workerEnv, tenant).catalog();
  return { version: snapshot.version, names: new Map((snapshot.records ?? []).map((r) => [r.name, r.deleted])) };
}

describe("MCP servers as tool sources", () => {
  it("Header secrets are never returned", async () => {
    const tenant = fresh("secrets");
    const server = new McpTestServer(fresh("srv"), [search]);
    const secret = `sk-live-${crypto.randomUUID()}`;
    const apiKey = `key-${crypto.randomUUID()}`;
    // A server that echoes the request's headers in its refusal (as some do): the problem must not.
    const echoing = async (request: Request): Promise<Response> =>
      request.url.startsWith("https://echo.example.test/")
        ? new Response(`unauthorized: ${request.headers.get("authorization")} ${request.headers.get("x-api-key")}`, {
            status: 401,
          })
        : mcpFetch(server)(request);
    setHostSeams({ fetch: echoing });
    setLogLevel("info");
    const logged: string[] = [];
    for (const method of ["log", "info", "warn", "error", "debug"] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        logged.push(
          args.map((arg) => (typeof arg === "string" ? arg : (JSON.stringify(arg) ?? String(arg)))).join(" "),
        );
      });
    }
    const seen: string[] = [];
    const jwt = await operator(tenant);
    const send = async (method: string, path: string, body?: unknown): Promise<Response> => {
      const response = await app.fetch(
        new Request(`${BASE}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${jwt}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        }),
        { ...workerEnv, LOG_LEVEL: "info" },
        createExecutionContext(),
      );
      const text = await response.text();
      seen.push(`${response.status} ${JSON.stringify([...response.headers])} ${text}`);
      return new Response(text, { status: response.status, headers: response.headers });
    };
    const registration = { url: server.url, headers: { Authorization: `Bearer ${secret}`, "X-Api-Key": apiKey } };

    const created = await send("PUT", `/v1/mcp-servers/${server.name}`, registration);
    expect(created.status).toBe(201);
    const record = await json<McpServerResponse>(created);
    expect(record.headers).toEqual(["authorization", "x-api-key"]);
    expect(created.headers.get("etag")).toBeNull();
    // The server did receive them, on every request.
    expect(server.requests.length).toBeGreaterThan(0);
    expect(
      server.requests.every(
        (r) => r.headers["authorization"] === `Bearer ${secret}` && r.headers["x-api-key"] === apiKey,
      ),
    ).toBe(true);

    expect((await send("GET", `/v1/mcp-servers/${server.name}`)).status).toBe(200);
    expect((await send("GET", "/v1/mcp-servers")).status).toBe(200);
    expect((await send("POST", `/v1/mcp-servers/${server.name}/refresh`)).status).toBe(200);
    expect((await send("PUT", `/v1/mcp-servers/${server.name}`, registration)).status).toBe(200);
    expect((await send("GET", "/v1/openapi.json")).status).toBe(200);
    // Error bodies: a refused header beside a secret one, and a server that echoes the headers back.
    const refused = await send("PUT", `/v1/mcp-servers/${server.name}`, {
      ...registration,
      headers: { ...registration.headers, "Content-Type": secret },
    });
    expect(refused.status).toBe(422);
    expect((await json(refused))["field"]).toBe("headers.Content-Type");
    const echoed = await send("PUT", "/v1/mcp-servers/echo", { ...registration, url: "https://echo.example.test/mcp" });
    expect(echoed.status).toBe(502);
    expect((await json(echoed))["detail"]).toContain("[redacted]");

    // What sessions read of the catalog, and what the directory stores.
    const catalog = JSON.stringify(await directoryStub(workerEnv, tenant).catalog());
    expect(catalog).toContain(`${server.name}__search_issues`);
    const directory = workerEnv.DIRECTORY.get(
      workerEnv.DIRECTORY.idFromName(tenant),
    ) as DurableObjectStub<DirectoryObject>;
    const stored = await runInDurableObject(directory, (_instance: DirectoryObject, state) =>
      JSON.stringify([
        ...state.storage.sql.exec("SELECT * FROM mcp_servers").toArray(),
        ...state.storage.sql.exec("SELECT * FROM mcp_tools").toArray(),
      ]),
    );
    expect(stored).toContain("authorization");

    expect(logged.length).toBeGreaterThan(0);
    for (const text of [...seen, ...logged, catalog, stored]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(apiKey);
    }
    // The call path opens them, for the tenant's own server only.
    expect(await mcpEndpoint(workerEnv, tenant, server.name)).toEqual({
      url: server.url,
      headers: { authorization: `Bearer ${secret}`, "x-api-key": apiKey },
    });
    expect(await mcpEndpoint(workerEnv, fresh("other"), server.name)).toBeUndefined();
  });

  it("refuses each invalid registration naming its field, and writes nothing", async () => {
    const tenant = fresh("invalid");
    const server = new McpTestServer("valid", [search]);
    setHostSeams({ fetch: mcpFetch(server) });
    const cases: { readonly name?: string; readonly body: unknown; readonly field: string }[] = [
      { body: {}, field: "url" },
      { body: { url: 42 }, field: "url" },
      { body: { url: "not a url" }, field: "url" },
      { body: { url: "ftp://mcp.example.test/valid/mcp" }, field: "url" },
      { body: { url: "https://user:pw@mcp.example.test/valid/mcp" }, field: "url" },
      { body: { url: server.url, headers: { authorization: 7 } }, field: "headers.authorization" },
      { body: { url: server.url, headers: { "bad header": "x" } }, field: "headers.bad header" },
      { body: { url: server.url, headers: { "x-key": "a\r\nb" } }, field: "headers.x-key" },
      { body: { url: server.url, headers: { "Mcp-Session-Id": "x" } }, field: "headers.Mcp-Session-Id" },
      { body: { url: server.url, headers: { "X-Key": "a", "x-key": "b" } }, field: "headers.x-key" },
      { body: { url: server.url, headers: "authorization: x" }, field: "headers" },
      { body: { url: server.url, allowedTools: "search_issues" }, field: "allowedTools" },
      { body: { url: server.url, allowedTools: [""] }, field: "allowedTools.0" },
      { body: { url: server.url, approval: "sometimes" }, field: "approval" },
      { body: { url: server.url, timeoutMs: 5 }, field: "timeoutMs" },
      { name: "under_score", body: { url: server.url }, field: "name" },
      { name: "x".repeat(33), body: { url: server.url }, field: "name" },
    ];
    for (const { name, body, field } of cases) {
      const response = await putServer(tenant, name ?? "valid", body);
      const problem = await json(response);
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(problem, JSON.stringify(body)).toMatchObject({ code: "invalid_mcp_server", field });
    }
    expect(server.requests).toHaveLength(0);
    expect(await json(await call("GET", "/v1/mcp-servers", { token: await operator(tenant) }))).toEqual({ items: [] });
    expect((await catalogOf(tenant)).version).toBe(0);
    // A name no PUT accepts names no server.
    expect(
      await json(await call("GET", "/v1/mcp-servers/under_score", { token: await operator(tenant) })),
    ).toMatchObject({ code: "mcp_server_not_found" });
    expect((await call("POST", "/v1/mcp-servers/valid/refresh", { token: await operator(tenant) })).status).toBe(404);
    expect((await call("DELETE", "/v1/mcp-servers/valid", { token: await operator(tenant) })).status).toBe(404);
  });

  it("plain http: URLs are refused outside development", async () => {
    const tenant = fresh("http");
    const server = new McpTestServer(fresh("plain"), [search]);
    const plain = server.url.replace("https:", "http:");
    // The seam serves the plain URL as the test server.
    setHostSeams({
      fetch: async (request) => server.fetch(new Request(request.url.replace("http:", "https:"), request)),
    });
    const put = async (environment: string): Promise<Response> =>
      app.fetch(
        new Request(`${BASE}/v1/mcp-servers/local`, {
          method: "PUT",
          headers: { authorization: `Bearer ${await operator(tenant)}`, "content-type": "application/json" },
          body: JSON.stringify({ url: plain }),
        }),
        { ...workerEnv, ENVIRONMENT: environment },
        createExecutionContext(),
      );
    for (const environment of ["production", "staging"]) {
      const refused = await put(environment);
      expect(refused.status).toBe(422);
      expect(await json(refused)).toMatchObject({ code: "invalid_mcp_server", field: "url" });
    }
    expect(server.requests).toHaveLength(0);
    expect((await catalogOf(tenant)).version).toBe(0);
    const development = await put("development");
    expect(development.status).toBe(201);
    expect((await json<McpServerResponse>(development)).url).toBe(plain);
  });

  it("client and user tokens get 403 on every MCP server route, and nothing is written", async () => {
    const tenant = fresh("forbidden");
    const server = new McpTestServer("github", [search]);
    setHostSeams({ fetch: mcpFetch(server) });
    for (const role of ["client", "user"] as const) {
      const jwt = await token(tenant, role, role === "user" ? { sub: "u1" } : {});
      for (const [method, path, body] of [
        ["PUT", "/v1/mcp-servers/github", { url: server.url }],
        ["GET", "/v1/mcp-servers", undefined],
        ["GET", "/v1/mcp-servers/github", undefined],
        ["DELETE", "/v1/mcp-servers/github", undefined],
        ["POST", "/v1/mcp-servers/github/refresh", undefined],
      ] as const) {
        const response = await call(method, path, { token: jwt, ...(body === undefined ? {} : { body }) });
        expect(response.status, `${role} ${method} ${path}`).toBe(403);
        expect((await json(response))["code"]).toBe("forbidden");
      }
    }
    expect(server.requests).toHaveLength(0);
    expect((await catalogOf(tenant)).version).toBe(0);
  });

  it("a server that does not answer as MCP is 502: a PUT writes nothing, a refresh keeps the old snapshot", async () => {
    const tenant = fresh("unreachable");
    const server = new McpTestServer(fresh("flaky"), [search]);
    let down = true;
    setHostSeams({
      fetch: async (request) => {
        if (request.url.startsWith("https://html.example.test/"))
          return new Response("<html>hello</html>", { status: 200, headers: { "content-type": "text/html" } });
        return down ? new Response("bad gateway", { status: 502 }) : server.fetch(request);
      },
    });
    for (const url of [server.url, "https://html.example.test/mcp", "https://nothing.example.test/mcp"]) {
      const response = await putServer(tenant, "flaky", { url });
      expect(response.status, url).toBe(502);
      expect(await json(response)).toMatchObject({ code: "mcp_server_unreachable" });
    }
    expect((await call("GET", "/v1/mcp-servers/flaky", { token: await operator(tenant) })).status).toBe(404);
    expect((await catalogOf(tenant)).version).toBe(0);

    down = false;
    const created = await json<McpServerResponse>(await putServer(tenant, "flaky", { url: server.url }));
    const before = await catalogOf(tenant);
    server.setTools([{ ...search, description: "changed" }]);
    down = true;
    const refresh = await call("POST", "/v1/mcp-servers/flaky/refresh", { token: await operator(tenant) });
    expect(refresh.status).toBe(502);
    expect(await json(refresh)).toMatchObject({ code: "mcp_server_unreachable" });
    const kept = await json<McpServerResponse>(
      await call("GET", "/v1/mcp-servers/flaky", { token: await operator(tenant) }),
    );
    expect(kept).toEqual(created);
    expect(await catalogOf(tenant)).toEqual(before);
  });

  it("a PUT follows nextCursor through every page of the tool list, within its limits", async () => {
    const tenant = fresh("pages");
    setHostSeams({ fetch: pagingServer(3, 2) });
    const record = await json<McpServerResponse>(
      await putServer(tenant, "paged", { url: "https://paged.example.test/mcp" }),
    );
    expect(record.tools.map((tool) => tool.name)).toEqual(["t0_0", "t0_1", "t1_0", "t1_1", "t2_0", "t2_1"]);
    expect([...(await catalogOf(tenant)).names.keys()]).toHaveLength(6);
    for (const [pages, perPage] of [
      [Infinity, 1],
      [2, 300],
    ] as const) {
      setHostSeams({ fetch: pagingServer(pages, perPage) });
      const refused = await putServer(tenant, "endless", { url: "https://paged.example.test/mcp" });
      expect(refused.status, `${pages} pages of ${perPage}`).toBe(422);
      expect(await json(refused)).toMatchObject({ code: "invalid_mcp_server", field: "url" });
    }
    expect((await call("GET", "/v1/mcp-servers/endless", { token: await operator(tenant) })).status).toBe(404);
  });

  it("a refresh that read a registration a PUT has since replaced writes nothing", async () => {
    const tenant = fresh("race");
    const server = new McpTestServer(fresh("race"), [search]);
    setHostSeams({ fetch: mcpFetch(server) });
    await putServer(tenant, "race", { url: server.url });
    const stub = directoryStub(workerEnv, tenant);
    const read = await stub.mcpServerSecrets("race");
    expect(read?.revision).toBe(1);
    server.setTools([{ ...search, description: "after the PUT" }]);
    const replaced = await json<McpServerResponse>(await putServer(tenant, "race", { url: server.url }));
    const stale = await stub.refreshMcpServer("race", read?.revision ?? 0, { tools: [], snapshot: "0".repeat(64) });
    expect(stale).toMatchObject({ type: "superseded", record: { snapshot: replaced.snapshot } });
    expect(await json(await call("GET", "/v1/mcp-servers/race", { token: await operator(tenant) }))).toEqual(replaced);
    expect(await stub.refreshMcpServer("gone", 1, { tools: [], snapshot: "0".repeat(64) })).toEqual({
      type: "not_found",
    });
  });

  it("a combined name that breaks the tool-name rule is listed with the reason but not selectable", async () => {
    const tenant = fresh("names");
    const name = "a-very-long-server-name-of-30ch";
    const server = new McpTestServer(name, [
      search,
      { name: "x".repeat(40), inputSchema: {} },
      { name: "dotted.name", inputSchema: {} },
      { name: "not_allowed", inputSchema: {} },
    ]);
    setHostSeams({ fetch: mcpFetch(server) });
    const response = await putServer(tenant, name, {
      url: server.url,
      allowedTools: ["search_issues", "x".repeat(40), "dotted.name"],
    });
    expect(response.status).toBe(201);
    const record = await json<McpServerResponse>(response);
    const byName = new Map(record.tools.map((tool) => [tool.name, tool]));
    expect(byName.get("search_issues")).toMatchObject({ selectableAs: `${name}__search_issues` });
    expect(byName.get("search_issues")?.reason).toBeUndefined();
    for (const tool of ["x".repeat(40), "dotted.name"]) {
      expect(byName.get(tool)?.selectableAs, tool).toBeUndefined();
      expect(byName.get(tool)?.reason, tool).toContain("is not a valid tool name");
    }
    expect(byName.get("not_allowed")).toMatchObject({ reason: "not in allowedTools" });
    expect([...(await catalogOf(tenant)).names.keys()]).toEqual([`${name}__search_issues`]);
    // The listed name is what GET /v1/mcp-servers answers too.
    const listed = await json<{ items: McpServerResponse[] }>(
      await call("GET", "/v1/mcp-servers", { token: await operator(tenant) }),
    );
    expect(listed.items).toEqual([record]);
    const refused = await createSession(tenant, uniqueSession("mcp-names"), [`${name}__dotted.name`]);
    expect(refused.status).toBe(422);
    const tooLong = await createSession(tenant, uniqueSession("mcp-names"), [`${name}__not_allowed`]);
    expect(await json(tooLong)).toMatchObject({ code: "unknown_tool", field: "selectedTools.0" });
  });

  it("a refresh changes the snapshot hash and the next session turn offers the new schema", async () => {
    const tenant = fresh("refresh");
    const server = new McpTestServer(fresh("gh"), [
      search,
      {
        name: "close_issue",
        description: "Close an issue",
        inputSchema: { properties: { number: { type: "integer" } } },
      },
    ]);
    setHostSeams({ fetch: mcpFetch(server), catalogTtlMs: 0 });
    const first = await json<McpServerResponse>(await putServer(tenant, server.name, { url: server.url }));
    expect(first.snapshot).toMatch(/^[0-9a-f]{64}$/);
    const session = uniqueSession("mcp-refresh");
    expect(
      (await createSession(tenant, session, ["echo", `${server.name}__search_issues`, `${server.name}__close_issue`]))
        .status,
    ).toBe(201);
    await say(tenant, session, "first");
    expect(await transcript(tenant, session)).toContain("Search the issues of a repository");

    // The server changes its list; the snapshot is pinned until a refresh.
    server.setTools([
      {
        ...search,
        description: "Search issues, version two",
        inputSchema: { properties: { query: { type: "string" }, label_filter: { type: "string" } } },
      },
    ]);
    await say(tenant, session, "second");
    expect(await transcript(tenant, session)).not.toContain("label_filter");

    // The same list answers the same hash however often it is read, and in whatever order of tools and keys.
    server.setTools([
      {
        inputSchema: { properties: { number: { type: "integer" } } },
        description: "Close an issue",
        name: "close_issue",
      },
      { ...search, inputSchema: { required: ["query"], properties: { query: { type: "string" } } } },
    ]);
    const same = await json<McpServerResponse>(
      await call("POST", `/v1/mcp-servers/${server.name}/refresh`, { token: await operator(tenant) }),
    );
    expect(same.snapshot).toBe(first.snapshot);
    expect(same.version).toBe(first.version);

    server.setTools([
      {
        ...search,
        description: "Search issues, version two",
        inputSchema: { properties: { query: { type: "string" }, label_filter: { type: "string" } } },
      },
    ]);
    const refreshed = await json<McpServerResponse>(
      await call("POST", `/v1/mcp-servers/${server.name}/refresh`, { token: await operator(tenant) }),
    );
    expect(refreshed.snapshot).not.toBe(first.snapshot);
    expect(refreshed.version).toBeGreaterThan(first.version);
    await say(tenant, session, "third");
    const text = await transcript(tenant, session);
    expect(text).toContain("Search issues, version two");
    expect(text).toContain("label_filter");
    // The tool that disappeared is a tombstone: still selectable, its new calls a tool error.
    const catalog = await catalogOf(tenant);
    expect(catalog.names.get(`${server.name}__close_issue`)).toBe(true);
    expect(catalog.names.get(`${server.name}__search_issues`)).toBe(false);
    const captured = await directoryStub(workerEnv, tenant).catalog();
    const live = captured.records?.find((r) => r.name === `${server.name}__search_issues`);
    expect(live?.definition?.handler).toEqual({
      type: "mcp",
      server: server.name,
      tool: "search_issues",
      url: server.url,
      timeoutMs: 60_000,
      idempotent: true,
      snapshot: refreshed.snapshot,
    });
  });

  it("a session selecting {server}__{tool} is accepted and an unknown one is refused like unknown catalog tools", async () => {
    const tenant = fresh("select");
    const server = new McpTestServer("github", [search]);
    setHostSeams({ fetch: mcpFetch(server) });
    expect((await putServer(tenant, "github", { url: server.url })).status).toBe(201);
    expect((await createSession(tenant, uniqueSession("mcp-select"), ["echo", "github__search_issues"])).status).toBe(
      201,
    );
    for (const unknown of ["github__nope", "gitlab__search_issues"]) {
      const refused = await createSession(tenant, uniqueSession("mcp-unknown"), ["echo", unknown]);
      expect(refused.status, unknown).toBe(422);
      expect(await json(refused)).toMatchObject({ code: "unknown_tool", field: "selectedTools.1" });
    }
    // Another tenant's server is not this tenant's.
    expect(
      (await createSession(fresh("select-other"), uniqueSession("mcp-other"), ["github__search_issues"])).status,
    ).toBe(422);
    // A deleted server's tools stay selectable (their new calls fail), like a deleted catalog tool.
    const deleted = await json(await call("DELETE", "/v1/mcp-servers/github", { token: await operator(tenant) }));
    expect(deleted).toMatchObject({ name: "github", deleted: true });
    expect((await catalogOf(tenant)).names.get("github__search_issues")).toBe(true);
    const after = uniqueSession("mcp-deleted");
    expect((await createSession(tenant, after, ["echo", "github__search_issues"])).status).toBe(201);
    expect((await call("GET", "/v1/mcp-servers/github", { token: await operator(tenant) })).status).toBe(404);
    // A new call of it is a tool error, and nothing reaches the server.
    const before = server.requests.length;
    await say(tenant, after, '/call github__search_issues {"query":"x"}');
    expect(await transcript(tenant, after)).toContain("tool_removed");
    expect(server.requests).toHaveLength(before);
    expect(server.calls).toHaveLength(0);
  });

  it("McpServersClient puts, lists, gets, refreshes and deletes", async () => {
    const tenant = fresh("client");
    const server = new McpTestServer(fresh("sdk"), [search]);
    setHostSeams({ fetch: mcpFetch(server) });
    const servers = new McpServersClient(await client(tenant, "operator"));
    const record = await servers.put("sdk", {
      url: server.url,
      headers: { authorization: "Bearer t" },
      approval: "always",
    });
    expect(record).toMatchObject({
      name: "sdk",
      approval: "always",
      headers: ["authorization"],
      tools: [{ name: "search_issues", selectableAs: "sdk__search_issues" }],
    });
    expect((await servers.list()).items.map((item) => item.name)).toEqual(["sdk"]);
    expect(await servers.get("sdk")).toEqual(record);
    expect((await servers.refresh("sdk")).snapshot).toBe(record.snapshot);
    expect(await servers.delete("sdk")).toEqual({ name: "sdk", deleted: true, version: record.version + 1 });
    await expect(servers.get("sdk")).rejects.toMatchObject({ status: 404 });
    const captured = await directoryStub(workerEnv, tenant).catalog();
    expect(captured.records?.find((r) => r.name === "sdk__search_issues")?.deleted).toBe(true);
    // The server's approval is its tools' approval.
    await servers.put("sdk", { url: server.url, approval: "always" });
    const revived = (await directoryStub(workerEnv, tenant).catalog()).records?.find(
      (r) => r.name === "sdk__search_issues",
    );
    expect(revived).toMatchObject({
      deleted: false,
      definition: {
        approval: "always",
        description: search.description,
        parameters: { type: "object", ...search.inputSchema },
      },
    });
  });
});
