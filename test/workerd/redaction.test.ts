/**
 * What users and the model see of a remote call (docs/tools.md "What users and the model see"): no sealed
 * value (an MCP server's header values, an HTTP tool's signing secret) or any part of one (the token after
 * its scheme, a Basic credential's `user:pass` and its halves) in any text that leaves the object, and no
 * tool's or server's URL in what a user token reads; an operator still sees the URL in a task's target.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { toolSecret } from "../../src/worker/crypto/webhooks.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { createSession, send } from "./mcp-call-fixtures.js";
import { McpTestServer, mcpFetch, type McpTestTool } from "./mcp-fixtures.js";
import { resetSeams } from "./session-fixtures.js";
import { httpDefinition, PRODUCT, ProductEndpoint } from "./tool-fixtures.js";

const TENANT = "redaction";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const BEARER = "mcp-bearer-token-7f3a9c";
const BASIC_USER = "vault-admin";
const BASIC_PASS = "hunter2-pass-9876";
const BASIC = btoa(`${BASIC_USER}:${BASIC_PASS}`);
const QUERY_KEY = "sk-query-key-5d1e8b";

/** Every secret and every part of one that must never leave the object. */
function secretsOf(httpSecret: string): string[] {
  return [
    `Bearer ${BEARER}`,
    BEARER,
    `Basic ${BASIC}`,
    BASIC,
    `${BASIC_USER}:${BASIC_PASS}`,
    BASIC_USER,
    BASIC_PASS,
    httpSecret,
    httpSecret.slice("whsec_".length),
  ];
}

/**
 * What a server that echoes the credentials it was sent says: the MCP server its header values (and their
 * parts), the HTTP tool's product its signing secret (and its key without `whsec_`).
 */
function echo(httpSecret?: string): string {
  const parts =
    httpSecret === undefined
      ? [`Bearer ${BEARER}`, BEARER, `Basic ${BASIC}`, BASIC, `${BASIC_USER}:${BASIC_PASS}`, BASIC_USER, BASIC_PASS]
      : [`Bearer ${httpSecret}`, httpSecret, httpSecret.slice("whsec_".length)];
  return `you sent: ${parts.join(" | ")}`;
}

const LEAKY_TOOLS: McpTestTool[] = [
  {
    name: "rpc_error",
    inputSchema: {},
    run: () => Promise.reject(new McpError(ErrorCode.InvalidParams, `credential refused; ${echo()}`)),
  },
  {
    name: "reply",
    inputSchema: {},
    run: () => ({ content: [{ type: "text", text: echo() }], structuredContent: { note: echo() } }),
  },
  { name: "tool_error", inputSchema: {}, run: () => ({ content: [{ type: "text", text: echo() }], isError: true }) },
  {
    // A long error whose 500th character falls inside the token: cut first, its start would survive.
    name: "long_error",
    inputSchema: {},
    run: () => Promise.reject(new McpError(ErrorCode.InternalError, `${"x".repeat(490)}${BEARER}${"y".repeat(2000)}`)),
  },
];

async function putTool(name: string, url: string): Promise<void> {
  const definition = httpDefinition(name);
  const response = await call("PUT", `/v1/tools/${name}`, {
    token: await token(TENANT, "operator"),
    body: { ...definition, handler: { ...definition.handler, url } },
  });
  expect([200, 201], await response.clone().text()).toContain(response.status);
}

async function putServer(server: McpTestServer, url: string, headers: Record<string, string> = {}): Promise<void> {
  const response = await call("PUT", `/v1/mcp-servers/${server.name}`, {
    token: await token(TENANT, "operator"),
    body: { url, headers },
  });
  expect([200, 201], await response.clone().text()).toContain(response.status);
}

function userToken(session: string): Promise<string> {
  return token(TENANT, "user", { sub: `user-of-${session}`, sessions: [session] });
}

async function read(path: string, jwt: string): Promise<string> {
  const response = await call("GET", path, { token: jwt });
  expect(response.status, path).toBe(200);
  return response.text();
}

/** The user's SSE watch of the root conversation, read until `marker` shows up. */
async function watchUntil(session: string, jwt: string, marker: string, start: () => Promise<void>): Promise<string> {
  const controller = new AbortController();
  const response = await call("GET", `/v1/sessions/${session}/conversations/root/watch`, {
    token: jwt,
    headers: { accept: "text/event-stream" },
  });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  try {
    await start();
    while (!text.includes(marker)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    controller.abort();
    await reader.cancel().catch(() => undefined);
  }
  return text;
}

describe("redaction", () => {
  it("Sealed values never leave the object, in any text", async () => {
    const httpSecret = await toolSecret(env.WEBHOOK_MASTER_SECRET, TENANT, "leaky");
    const server = new McpTestServer("vault", LEAKY_TOOLS);
    const product = new ProductEndpoint(TENANT).reply("leaky", (n) =>
      n === 1
        ? { status: 200, body: { output: { said: echo(httpSecret) } } }
        : n === 2
          ? { status: 400, body: { title: "refused", detail: echo(httpSecret), echoed: echo(httpSecret) } }
          : { status: 500, body: { detail: echo(httpSecret) } },
    );
    setHostSeams({
      fetch: (request) => (request.url.startsWith(PRODUCT) ? product.fetch(request) : mcpFetch(server)(request)),
    });
    await putServer(server, server.url, { authorization: `Bearer ${BEARER}`, "x-upstream": `Basic ${BASIC}` });
    await putTool("leaky", `${PRODUCT}/leaky`);
    const tools = ["vault__rpc_error", "vault__reply", "vault__tool_error", "vault__long_error", "leaky"];
    const name = uniqueSession("sealed");
    await createSession(TENANT, name, tools);
    const user = await userToken(name);

    const watched = await watchUntil(name, user, "all-calls-done", async () => {
      for (const tool of [...tools, "leaky", "leaky"])
        expect(
          (await send(TENANT, name, `/call ${tool} ${tool === "leaky" ? '{"id":1}' : "{}"}`, 10)).result.status,
        ).toBe("done");
      await send(TENANT, name, "all-calls-done", 10);
    });
    expect(server.calls).toHaveLength(4);
    expect(product.seen("leaky")).toHaveLength(3);

    const operator = await token(TENANT, "operator");
    const client = await token(TENANT, "client");
    const entries = await read(`/v1/sessions/${name}/conversations/root/entries?limit=100`, client);
    const texts = {
      entries,
      userEntries: await read(`/v1/sessions/${name}/conversations/root/entries?limit=100`, user),
      userTasks: await read(`/v1/sessions/${name}/tasks?limit=100`, user),
      operatorTasks: await read(`/v1/sessions/${name}/tasks?limit=100`, operator),
      userSnapshot: await read(`/v1/sessions/${name}/conversations/root`, user),
      watched,
    };
    // The calls ran and their (redacted) texts are there: the model read each of them.
    expect(entries).toContain(`MCP server \\"vault\\" answered with an error (code ${ErrorCode.InvalidParams})`);
    expect(entries).toContain("[redacted]");
    expect(entries).toContain('HTTP tool \\"leaky\\"');
    // A server's error text is a detail of at most 500 characters.
    const long = /answered with an error \(code -32603\): (x*\[redacted\]y*)(\.\.\.)?/.exec(entries);
    expect(long?.[1]).toHaveLength(500);
    expect(long?.[2]).toBe("...");
    expect(watched).toContain("[redacted]");
    for (const [where, text] of Object.entries(texts))
      for (const secret of secretsOf(httpSecret)) expect(text, `${where} holds ${secret}`).not.toContain(secret);
  });

  it("Users never see a tool's or server's URL", async () => {
    const toolUrl = `${PRODUCT}/keyed?key=${QUERY_KEY}`;
    const server = new McpTestServer("hidden", [
      { name: "boom", inputSchema: {}, run: () => Promise.reject(new McpError(ErrorCode.InternalError, "down")) },
    ]);
    const serverUrl = `${server.url}?key=${QUERY_KEY}`;
    const product = new ProductEndpoint(TENANT).reply("keyed", () => ({
      status: 500,
      body: { detail: `upstream ${toolUrl} is down` },
    }));
    setHostSeams({
      fetch: (request) => (request.url.startsWith(PRODUCT) ? product.fetch(request) : mcpFetch(server)(request)),
    });
    await putServer(server, serverUrl);
    await putTool("keyed", toolUrl);
    const name = uniqueSession("urls");
    await createSession(TENANT, name, ["keyed", "hidden__boom"]);
    const user = await userToken(name);
    // The user's watch sees each remote call's task start, change and end.
    const watched = await watchUntil(name, user, "urls-done", async () => {
      expect((await send(TENANT, name, '/call keyed {"id":1}', 10)).result.status).toBe("done");
      expect((await send(TENANT, name, "/call hidden__boom {}", 10)).result.status).toBe("done");
      await send(TENANT, name, "urls-done", 10);
    });
    expect(watched).toContain('"kind":"remote_call"');

    interface Listed {
      readonly kind: string;
      readonly state: { readonly target?: Record<string, unknown> };
    }
    const userCalls = (
      await json<{ items: Listed[] }>(await call("GET", `/v1/sessions/${name}/tasks?limit=100`, { token: user }))
    ).items.filter((t) => t.kind === "remote_call");
    expect(userCalls.map((t) => t.state.target?.["tool"])).toEqual(["keyed", "hidden__boom"]);
    for (const task of userCalls) expect(task.state.target).not.toHaveProperty("url");
    const userTexts = [
      watched,
      await read(`/v1/sessions/${name}/tasks?limit=100`, user),
      await read(`/v1/sessions/${name}/conversations/root/entries?limit=100`, user),
      await read(`/v1/sessions/${name}/conversations/root`, user),
    ];
    for (const text of userTexts) {
      for (const hidden of [QUERY_KEY, "product.test/keyed", server.url, "mcp.example.test"])
        expect(text).not.toContain(hidden);
    }
    const transcript = userTexts[2] ?? "";
    expect(transcript).toContain('HTTP tool \\"keyed\\"');
    expect(transcript).toContain('MCP server \\"hidden\\"');

    // The operator still sees where each call went.
    const operatorCalls = (
      await json<{ items: Listed[] }>(
        await call("GET", `/v1/sessions/${name}/tasks?limit=100`, { token: await token(TENANT, "operator") }),
      )
    ).items.filter((t) => t.kind === "remote_call");
    expect(operatorCalls.map((t) => t.state.target?.["url"])).toEqual([toolUrl, serverUrl]);
  });
});
