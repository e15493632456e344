/**
 * Fixtures for calling MCP tools: an `McpTestServer` registered for a tenant as an operator does
 * (`PUT /v1/mcp-servers/{name}`, which reads its tool list and pins it; each tool is then selectable as
 * `{server}__{tool}`), a refresh, sessions over HTTP, and the reads the tests share.
 */
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { McpServerBody, McpServerResponse } from "../../src/api/mcp-servers.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, json, token, until } from "./http-fixtures.js";
import type { McpTestServer } from "./mcp-fixtures.js";

/** Register `server` for the tenant (its URL, and `body`'s headers, allowedTools, approval); the registration. */
export async function registerMcpServer(
  tenant: string,
  server: McpTestServer,
  body: Omit<McpServerBody, "url"> = {},
): Promise<McpServerResponse> {
  const response = await call("PUT", `/v1/mcp-servers/${server.name}`, {
    token: await token(tenant, "operator"),
    body: { url: server.url, ...body },
  });
  expect([200, 201], await response.clone().text()).toContain(response.status);
  return json(response);
}

/** Re-read a registered server's tool list (a new snapshot when it changed). */
export async function refreshMcpServer(tenant: string, name: string): Promise<McpServerResponse> {
  const response = await call("POST", `/v1/mcp-servers/${name}/refresh`, { token: await token(tenant, "operator") });
  expect(response.status, await response.clone().text()).toBe(200);
  return json(response);
}

export async function createSession(
  tenant: string,
  name: string,
  tools: readonly string[],
  extra: Record<string, unknown> = {},
): Promise<void> {
  const response = await call("PUT", `/v1/sessions/${name}`, {
    token: await token(tenant, "client"),
    body: { model: "echo", selectedTools: tools, ...extra },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

export async function send(
  tenant: string,
  name: string,
  input: string,
  wait?: number,
): Promise<{ inputId: number; result: { status: string } }> {
  const response = await call(
    "POST",
    `/v1/sessions/${name}/conversations/root/inputs${wait === undefined ? "" : `?wait=${wait}`}`,
    { token: await token(tenant, "client"), body: { input } },
  );
  expect([201, 202]).toContain(response.status);
  return json(response);
}

export async function inputDone(tenant: string, name: string, inputId: number): Promise<void> {
  const t = await token(tenant, "client");
  await until(
    async () => {
      const view = await json<{ result: { status: string } }>(
        await call("GET", `/v1/sessions/${name}/inputs/${inputId}`, { token: t }),
      );
      return view.result.status === "done" ? true : undefined;
    },
    `input ${inputId} done`,
    1000,
  );
}

export function sessionStub(tenant: string, name: string): DurableObjectStub<SessionObject> {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${tenant}:${name}`)) as unknown as DurableObjectStub<SessionObject>;
}
