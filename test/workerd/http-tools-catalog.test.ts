/**
 * A tenant's tool catalog over HTTP (docs/tools.md, docs/api.md "Tools"): operators define tools with
 * `PUT /v1/tools/{tool}`; every refusal names its field and writes nothing; versions are ETags and
 * `If-Match` makes writes conditional; sessions select catalog tools (live or deleted) by name, learn a
 * change within the catalog's time-to-live, and a session of built-in tools never reads the catalog.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { app } from "../../src/worker/http/app.js";
import type { Env } from "../../src/worker/env.js";
import type { ToolDefinition } from "../../src/kinds/catalog-types.js";
import { DirectoryObject, directoryStub, type CatalogSnapshot } from "../../src/worker/directory/object.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { PicoApiError } from "../../src/client/transport.js";
import { BASE, call, client, json, token, uniqueSession } from "./http-fixtures.js";
import { ManualClock, ManualTime } from "./session-fixtures.js";
import { CatalogCache } from "../../src/worker/session/tool-catalog.js";

const workerEnv = env as unknown as Env;

let tenants = 0;
/** A tenant of its own per test: its catalog starts empty. */
function freshTenant(label: string): string {
  tenants += 1;
  return `tools-${label}-${tenants}-${Date.now().toString(36)}`;
}

const lookup = {
  description: "Look up an order by its id",
  parameters: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
  handler: { type: "http", url: "https://products.example/tools/lookup" },
};

async function operator(tenant: string): Promise<string> {
  return token(tenant, "operator");
}

async function putTool(
  tenant: string,
  name: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return call("PUT", `/v1/tools/${name}`, { token: await operator(tenant), body, headers });
}

/** The catalog as the tenant's directory keeps it (every record, tombstones too). */
async function snapshot(tenant: string): Promise<CatalogSnapshot> {
  return directoryStub(workerEnv, tenant).catalog();
}

afterEach(() => {
  setHostSeams({});
  vi.restoreAllMocks();
});

/** Time stands still unless a test moves it; the catalog copy lives `ttlMs`. */
function manualTime(ttlMs: number): ManualTime {
  const time = new ManualTime();
  setHostSeams({ clock: () => new ManualClock(time), catalogTtlMs: ttlMs });
  return time;
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

describe("the tool catalog's routes", () => {
  it("a PUT stores the definition with its defaults; GET, the list and their ETags answer it", async () => {
    const tenant = freshTenant("put");
    const created = await putTool(tenant, "lookup", lookup);
    expect(created.status).toBe(201);
    const record = await json(created);
    expect(record).toEqual({
      name: "lookup",
      version: 1,
      updatedAt: expect.any(Number),
      deleted: false,
      definition: {
        ...lookup,
        handler: { ...lookup.handler, timeoutMs: 30_000, idempotent: false },
        approval: "never",
        onTimeout: "deny",
      },
      // An HTTP tool's signing secret, answered by the PUT that creates it (docs/tools.md "Secrets").
      secret: expect.stringMatching(/^whsec_/),
    });
    expect(created.headers.get("etag")).toBe('"1"');

    const client = await putTool(tenant, "confirm", {
      description: "Ask the user",
      parameters: { type: "object" },
      handler: { type: "client" },
      approval: "always",
      approvalTimeoutMs: 60_000,
      onTimeout: "allow",
    });
    expect(client.status).toBe(201);
    expect((await json<{ definition: unknown }>(client)).definition).toEqual({
      description: "Ask the user",
      parameters: { type: "object" },
      handler: { type: "client", timeoutMs: 86_400_000 },
      approval: "always",
      approvalTimeoutMs: 60_000,
      onTimeout: "allow",
    });

    const replaced = await putTool(tenant, "lookup", {
      ...lookup,
      handler: { ...lookup.handler, timeoutMs: 5_000, idempotent: true },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.headers.get("etag")).toBe('"3"');

    const got = await call("GET", "/v1/tools/lookup", { token: await operator(tenant) });
    expect(got.status).toBe(200);
    expect(got.headers.get("etag")).toBe('"3"');
    expect((await json<{ definition: { handler: unknown } }>(got)).definition.handler).toEqual({
      type: "http",
      url: lookup.handler.url,
      timeoutMs: 5_000,
      idempotent: true,
    });

    const list = await call("GET", "/v1/tools", { token: await operator(tenant) });
    expect(list.status).toBe(200);
    expect(list.headers.get("etag")).toBe('"3"');
    expect(
      (await json<{ items: { name: string; version: number }[] }>(list)).items.map((item) => [item.name, item.version]),
    ).toEqual([
      ["confirm", 2],
      ["lookup", 3],
    ]);
  });

  it("a DELETE leaves a tombstone: 404 to GET, gone from the list, revived by a PUT", async () => {
    const tenant = freshTenant("delete");
    await putTool(tenant, "lookup", lookup);
    const deleted = await call("DELETE", "/v1/tools/lookup", { token: await operator(tenant) });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ name: "lookup", deleted: true, version: 2 });
    expect(deleted.headers.get("etag")).toBe('"2"');

    const got = await call("GET", "/v1/tools/lookup", { token: await operator(tenant) });
    expect(got.status).toBe(404);
    expect((await json(got))["code"]).toBe("tool_not_found");
    expect((await json(await call("GET", "/v1/tools", { token: await operator(tenant) })))["items"]).toEqual([]);
    const again = await call("DELETE", "/v1/tools/lookup", { token: await operator(tenant) });
    expect(again.status).toBe(404);
    expect((await json(again))["code"]).toBe("tool_not_found");
    expect((await call("GET", "/v1/tools/never", { token: await operator(tenant) })).status).toBe(404);

    // The tombstone stays in the catalog sessions read (a deleted tool stays selectable).
    expect((await snapshot(tenant)).records).toEqual([
      { name: "lookup", version: 2, updatedAt: expect.any(Number), deleted: true },
    ]);

    const revived = await putTool(tenant, "lookup", lookup);
    expect(revived.status).toBe(201);
    expect((await json(revived))["version"]).toBe(3);
  });

  it("If-Match makes a PUT or DELETE conditional: another version or a missing tool is 412 and writes nothing", async () => {
    const tenant = freshTenant("ifmatch");
    expect((await putTool(tenant, "lookup", lookup, { "if-match": '"1"' })).status).toBe(412);
    const star = await putTool(tenant, "lookup", lookup, { "if-match": "*" });
    expect(star.status).toBe(412);
    expect(await json(star)).toMatchObject({ code: "precondition_failed", field: "if-match" });
    expect((await snapshot(tenant)).version).toBe(0);

    expect((await putTool(tenant, "lookup", lookup)).status).toBe(201);
    const stale = await putTool(tenant, "lookup", { ...lookup, description: "changed" }, { "if-match": '"7"' });
    expect(stale.status).toBe(412);
    expect((await json(stale))["detail"]).toContain("version 1");
    const staleDelete = await call("DELETE", "/v1/tools/lookup", {
      token: await operator(tenant),
      headers: { "if-match": '"7"' },
    });
    expect(staleDelete.status).toBe(412);
    expect(await snapshot(tenant)).toMatchObject({
      version: 1,
      records: [{ name: "lookup", version: 1, deleted: false, definition: { description: lookup.description } }],
    });

    const bad = await putTool(tenant, "lookup", lookup, { "if-match": 'W/"1"' });
    expect(bad.status).toBe(400);
    expect((await json(bad))["code"]).toBe("invalid_header");

    const current = await putTool(tenant, "lookup", { ...lookup, description: "changed" }, { "if-match": '"1"' });
    expect(current.status).toBe(200);
    expect(current.headers.get("etag")).toBe('"2"');
    expect(
      (await call("DELETE", "/v1/tools/lookup", { token: await operator(tenant), headers: { "if-match": "*" } }))
        .status,
    ).toBe(200);
  });

  it("refuses a client or agent token (403) and a request without a token (401)", async () => {
    const tenant = freshTenant("auth");
    for (const role of ["client", "agent"] as const) {
      const who = await token(tenant, role, role === "agent" ? { sessions: ["rig"] } : {});
      for (const [method, path, body] of [
        ["PUT", "/v1/tools/lookup", lookup],
        ["GET", "/v1/tools", undefined],
        ["GET", "/v1/tools/lookup", undefined],
        ["DELETE", "/v1/tools/lookup", undefined],
      ] as const) {
        const response = await call(method, path, { token: who, ...(body === undefined ? {} : { body }) });
        expect(response.status, `${role} ${method} ${path}`).toBe(403);
      }
    }
    expect((await call("PUT", "/v1/tools/lookup", { body: lookup })).status).toBe(401);
    expect((await call("GET", "/v1/tools")).status).toBe(401);
    expect((await snapshot(tenant)).version).toBe(0);
  });

  it("refuses each invalid definition naming its field, and writes nothing", async () => {
    const tenant = freshTenant("invalid");
    const cases: readonly { readonly name?: string; readonly body: unknown; readonly field: string }[] = [
      { name: "has space", body: lookup, field: "name" },
      { name: "a".repeat(65), body: lookup, field: "name" },
      { name: "mcp__tool", body: lookup, field: "name" },
      { name: "echo", body: lookup, field: "name" },
      { name: "job", body: lookup, field: "name" },
      { body: { ...lookup, description: "" }, field: "description" },
      { body: { ...lookup, description: "x".repeat(4097) }, field: "description" },
      { body: { ...lookup, parameters: { type: "array" } }, field: "parameters" },
      { body: { ...lookup, parameters: "object" }, field: "parameters" },
      {
        body: { ...lookup, parameters: { type: "object", properties: { a: { type: "string", pattern: "(" } } } },
        field: "parameters",
      },
      {
        body: { ...lookup, parameters: { type: "object", properties: { a: { $ref: "#/$defs/missing" } } } },
        field: "parameters",
      },
      { body: { ...lookup, handler: { type: "http", url: "ftp://products.example/x" } }, field: "handler.url" },
      { body: { ...lookup, handler: { type: "http", url: "not a url" } }, field: "handler.url" },
      // Credentials in the URL would be answered back on GET: refused as webhook endpoints and MCP servers refuse them.
      {
        body: { ...lookup, handler: { type: "http", url: "https://svc:pass@products.example/x" } },
        field: "handler.url",
      },
      {
        body: { ...lookup, handler: { type: "http", url: lookup.handler.url, timeoutMs: 999 } },
        field: "handler.timeoutMs",
      },
      {
        body: { ...lookup, handler: { type: "http", url: lookup.handler.url, timeoutMs: 600_001 } },
        field: "handler.timeoutMs",
      },
      { body: { ...lookup, handler: { type: "client", timeoutMs: 604_800_001 } }, field: "handler.timeoutMs" },
      { body: { ...lookup, handler: { type: "client", timeoutMs: 999 } }, field: "handler.timeoutMs" },
      { body: { ...lookup, handler: { type: "mcp" } }, field: "handler.type" },
      { body: { ...lookup, approvalTimeoutMs: 999 }, field: "approvalTimeoutMs" },
      { body: { ...lookup, approvalTimeoutMs: 604_800_001 }, field: "approvalTimeoutMs" },
      { body: { ...lookup, approval: "sometimes" }, field: "approval" },
      { body: { ...lookup, onTimeout: "retry" }, field: "onTimeout" },
      { body: { ...lookup, extra: true }, field: "extra" },
    ];
    for (const refused of cases) {
      const name = refused.name ?? "lookup";
      const response = await putTool(tenant, encodeURIComponent(name), refused.body);
      const problem = await json(response);
      expect(
        [response.status, problem["code"], problem["field"]],
        `${name} ${JSON.stringify(refused.body).slice(0, 120)}`,
      ).toEqual([422, "invalid_tool", refused.field]);
    }
    const notJson = await call("PUT", "/v1/tools/lookup", {
      token: await operator(tenant),
      rawBody: "{",
      headers: { "content-type": "application/json" },
    });
    expect(notJson.status).toBe(400);
    expect((await snapshot(tenant)).version).toBe(0);
  });

  it("plain http: URLs are accepted only where ENVIRONMENT is development", async () => {
    const tenant = freshTenant("http");
    const body = { ...lookup, handler: { type: "http", url: "http://localhost:8788/tools" } };
    expect(workerEnv.ENVIRONMENT).toBe("development");
    const request = async (): Promise<Request> =>
      new Request(`${BASE}/v1/tools/local`, {
        method: "PUT",
        headers: { authorization: `Bearer ${await operator(tenant)}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const production = await app.fetch(
      await request(),
      { ...workerEnv, ENVIRONMENT: "production" },
      createExecutionContext(),
    );
    expect(production.status).toBe(422);
    expect((await json(production))["field"]).toBe("handler.url");
    expect((await snapshot(tenant)).version).toBe(0);
    const development = await app.fetch(await request(), workerEnv, createExecutionContext());
    expect(development.status).toBe(201);
  });

  it("the catalog holds at most 200 live tools of at most 64 KB each", async () => {
    const tenant = freshTenant("limits");
    const big = { ...lookup, parameters: { type: "object", description: "x".repeat(66_000) } };
    const tooLarge = await putTool(tenant, "big", big);
    expect(tooLarge.status).toBe(422);
    expect((await json(tooLarge))["field"]).toBe("parameters");
    const stub = directoryStub(workerEnv, tenant);
    const directory = workerEnv.DIRECTORY.get(
      workerEnv.DIRECTORY.idFromName(tenant),
    ) as DurableObjectStub<DirectoryObject>;
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      const definition: ToolDefinition = {
        ...lookup,
        handler: { type: "http", url: lookup.handler.url, timeoutMs: 30_000, idempotent: false },
        approval: "never",
        onTimeout: "deny",
      };
      for (let i = 0; i < 200; i++) instance.putTool(`t${i}`, definition);
    });
    expect((await stub.listTools()).items).toHaveLength(200);
    const over = await putTool(tenant, "one_more", lookup);
    expect(over.status).toBe(422);
    expect((await json(over))["field"]).toBe("name");
    // Replacing a live tool is not a new one, and a deleted one frees its place.
    expect((await putTool(tenant, "t0", lookup)).status).toBe(200);
    expect((await call("DELETE", "/v1/tools/t1", { token: await operator(tenant) })).status).toBe(200);
    expect((await putTool(tenant, "one_more", lookup)).status).toBe(201);
  });

  it("client.tools() puts, lists, gets and deletes", async () => {
    const tenant = freshTenant("client");
    const tools = (await client(tenant, "operator")).tools();
    const record = await tools.put("lookup", lookup as Parameters<typeof tools.put>[1]);
    expect(record).toMatchObject({ name: "lookup", version: 1, deleted: false, definition: { approval: "never" } });
    expect((await tools.list()).items.map((item) => item.name)).toEqual(["lookup"]);
    const { secret, ...stored } = record;
    expect(secret).toMatch(/^whsec_/);
    expect(await tools.get("lookup")).toEqual(stored);
    const replaced = await tools.put("lookup", { ...lookup, description: "v2" } as Parameters<typeof tools.put>[1], {
      ifMatch: record.version,
    });
    expect(replaced.version).toBe(2);
    await expect(tools.delete("lookup", { ifMatch: 1 })).rejects.toMatchObject({ status: 412 });
    expect(await tools.delete("lookup", { ifMatch: 2 })).toEqual({ name: "lookup", deleted: true, version: 3 });
    const missing = await tools.get("lookup").catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(PicoApiError);
    expect((missing as PicoApiError).status).toBe(404);
    const forbidden = await (
      await client(tenant, "client")
    )
      .tools()
      .list()
      .catch((error: unknown) => error);
    expect((forbidden as PicoApiError).status).toBe(403);
  });
});

describe("sessions and the catalog", () => {
  it("a deleted tool stays selectable while an unknown name is 422 unknown_tool", async () => {
    const tenant = freshTenant("select");
    await putTool(tenant, "lookup", lookup);
    expect((await call("DELETE", "/v1/tools/lookup", { token: await operator(tenant) })).status).toBe(200);

    const name = uniqueSession("tools-select");
    expect((await createSession(tenant, name, ["echo", "lookup"])).status).toBe(201);
    const unknown = await createSession(tenant, uniqueSession("tools-unknown"), ["echo", "nope"]);
    expect(unknown.status).toBe(422);
    expect(await json(unknown)).toMatchObject({ code: "unknown_tool", field: "selectedTools.1" });

    const patch = async (selectedTools: readonly string[]): Promise<Response> =>
      call("PATCH", `/v1/sessions/${name}/conversations/root/config`, {
        token: await token(tenant, "client"),
        body: { selectedTools },
      });
    const refused = await patch(["lookup", "nope"]);
    expect(refused.status).toBe(422);
    expect(await json(refused)).toMatchObject({ code: "unknown_tool", field: "selectedTools.1" });
    expect(
      (
        await json<{ selectedTools: string[] }>(
          await call("GET", `/v1/sessions/${name}/conversations/root/config`, { token: await token(tenant, "client") }),
        )
      ).selectedTools,
    ).toEqual(["echo", "lookup"]);
    expect((await patch(["lookup"])).status).toBe(200);
    // Another tenant's tool of the same name is not this tenant's.
    const other = freshTenant("select-other");
    expect((await createSession(other, uniqueSession("tools-other"), ["lookup"])).status).toBe(422);
  });

  it("a tool defined a moment ago is selectable at once", async () => {
    const tenant = freshTenant("fresh");
    manualTime(3_600_000);
    await putTool(tenant, "first", lookup);
    const name = uniqueSession("tools-fresh");
    expect((await createSession(tenant, name, ["first"])).status).toBe(201);
    // The session's copy is fresh for an hour, yet a name it does not know makes it read again.
    await putTool(tenant, "second", lookup);
    const patched = await call("PATCH", `/v1/sessions/${name}/conversations/root/config`, {
      token: await token(tenant, "client"),
      body: { selectedTools: ["first", "second"] },
    });
    expect(patched.status).toBe(200);
    expect((await json<{ selectedTools: string[] }>(patched)).selectedTools).toEqual(["first", "second"]);
  });

  it("a catalog change reaches the session's next turn once its copy is older than the TTL", async () => {
    const tenant = freshTenant("ttl");
    const time = manualTime(30_000);
    await putTool(tenant, "lookup", { ...lookup, description: "lookup version one" });
    const name = uniqueSession("tools-ttl");
    expect((await createSession(tenant, name, ["echo", "lookup"])).status).toBe(201);
    await say(tenant, name, "first");
    expect(await transcript(tenant, name)).toContain("lookup version one");

    await putTool(tenant, "lookup", { ...lookup, description: "lookup version two" });
    time.now += 29_000;
    await say(tenant, name, "second");
    expect(await transcript(tenant, name)).not.toContain("lookup version two");

    time.now += 2_000;
    await say(tenant, name, "third");
    expect(await transcript(tenant, name)).toContain("lookup version two");
  });

  it("a session selecting only built-in tools never reads the catalog", async () => {
    const tenant = freshTenant("builtin");
    await putTool(tenant, "lookup", lookup);
    const reads = vi.spyOn(DirectoryObject.prototype, "catalog");
    const builtin = uniqueSession("tools-builtin");
    expect((await createSession(tenant, builtin, ["echo", "job"])).status).toBe(201);
    await say(tenant, builtin, "hello");
    await say(tenant, builtin, "again");
    const patched = await call("PATCH", `/v1/sessions/${builtin}/conversations/root/config`, {
      token: await token(tenant, "client"),
      body: { selectedTools: ["echo"] },
    });
    expect(patched.status).toBe(200);
    expect(reads).not.toHaveBeenCalled();

    // The same steps with a catalog tool selected do read it.
    const selecting = uniqueSession("tools-selecting");
    expect((await createSession(tenant, selecting, ["echo", "lookup"])).status).toBe(201);
    await say(tenant, selecting, "hello");
    expect(reads).toHaveBeenCalled();
  });
});

describe("CatalogCache", () => {
  const definition: ToolDefinition = {
    description: "d",
    parameters: { type: "object" },
    handler: { type: "client", timeoutMs: 1_000 },
    approval: "never",
    onTimeout: "deny",
  };

  it("reads at most once per TTL unless forced, sends its version, keeps its copy when the read fails or the version is unchanged", async () => {
    const time = new ManualTime();
    const asked: (number | undefined)[] = [];
    const reported: unknown[] = [];
    let answer: () => Promise<CatalogSnapshot> = async () => ({
      version: 2,
      records: [
        { name: "a", version: 1, updatedAt: 0, deleted: false, definition },
        { name: "b", version: 2, updatedAt: 0, deleted: true },
      ],
    });
    let tenant: string | undefined;
    const cache = new CatalogCache({
      tenant: () => tenant,
      clock: new ManualClock(time),
      ttlMs: () => 30_000,
      report: (error) => reported.push(error),
      read: (_tenant, since) => {
        asked.push(since);
        return answer();
      },
    });
    await cache.refresh({ force: true });
    expect(asked).toEqual([]); // no tenant (a session created over RPC): no catalog
    tenant = "t";
    await cache.refresh({});
    expect(cache.names()).toEqual(["a", "b"]);
    expect(cache.capture("a")).toEqual({ name: "a", version: 1, definition });
    expect(cache.capture("b")).toEqual({ name: "b", version: 2, removed: true });
    expect(cache.capture("c")).toBeUndefined();
    expect(cache.offer("a")).toEqual({ name: "a", description: "d", parameters: { type: "object" } });
    expect(cache.offer("b")).toBeUndefined();

    time.now += 29_999;
    await cache.refresh({});
    expect(asked).toEqual([undefined]);
    answer = async () => ({ version: 2 });
    await cache.refresh({ force: true });
    expect(asked).toEqual([undefined, 2]);
    expect(cache.names()).toEqual(["a", "b"]);

    answer = () => Promise.reject(new Error("the directory is away"));
    time.now += 30_000;
    await expect(cache.refresh({})).resolves.toBeUndefined();
    expect(reported).toHaveLength(1);
    expect(cache.capture("a")).toEqual({ name: "a", version: 1, definition });
  });
});
