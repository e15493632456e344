/**
 * Fixtures for calling MCP tools: a tenant's catalog offering an `McpTestServer`'s tools as
 * `{server}__{tool}` with an `mcp` handler (the shape the MCP server registry gives its snapshot's
 * tools, written to the tenant's directory directly), sessions over HTTP, and the reads the tests share.
 */
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { ToolDefinition } from "../../src/kinds/catalog-types.js";
import { directoryStub } from "../../src/worker/directory-object.js";
import type { Env } from "../../src/worker/env.js";
import type { SessionObject } from "../../src/worker/session-object.js";
import { call, json, token, until } from "./http-fixtures.js";
import type { McpTestServer, McpTestTool } from "./mcp-fixtures.js";

export interface OfferOptions {
  /** The tool-list snapshot's content hash the definition came from. */
  readonly snapshot?: string;
  readonly timeoutMs?: number;
  readonly approval?: "never" | "always";
}

/** The catalog definition of an MCP server's tool, as the registry offers it. */
export function mcpDefinition(server: McpTestServer, tool: McpTestTool, options: OfferOptions = {}): ToolDefinition {
  return {
    description: tool.description ?? `${tool.name} of ${server.name}`,
    parameters: { type: "object", ...tool.inputSchema },
    handler: {
      type: "mcp",
      server: server.name,
      tool: tool.name,
      url: server.url,
      timeoutMs: options.timeoutMs ?? 30_000,
      idempotent: tool.annotations?.idempotentHint === true,
      snapshot: options.snapshot ?? "snapshot-1",
    },
    approval: options.approval ?? "never",
    onTimeout: "deny",
  };
}

/** Offer `tool` of `server` in the tenant's catalog as `{server}__{tool}`; returns that name. */
export async function offerMcpTool(tenant: string, server: McpTestServer, tool: McpTestTool, options: OfferOptions = {}): Promise<string> {
  const name = `${server.name}__${tool.name}`;
  const outcome = await directoryStub(env as unknown as Env, tenant).putTool(name, mcpDefinition(server, tool, options));
  expect(outcome.type).toBe("stored");
  return name;
}

export async function createSession(tenant: string, name: string, tools: readonly string[], extra: Record<string, unknown> = {}): Promise<void> {
  const response = await call("PUT", `/v1/sessions/${name}`, { token: await token(tenant, "client"), body: { model: "echo", selectedTools: tools, ...extra } });
  expect(response.status, await response.clone().text()).toBe(201);
}

export async function send(tenant: string, name: string, input: string, wait?: number): Promise<{ inputId: number; result: { status: string } }> {
  const response = await call("POST", `/v1/sessions/${name}/conversations/root/inputs${wait === undefined ? "" : `?wait=${wait}`}`, { token: await token(tenant, "client"), body: { input } });
  expect([201, 202]).toContain(response.status);
  return json(response);
}

export async function inputDone(tenant: string, name: string, inputId: number): Promise<void> {
  const t = await token(tenant, "client");
  await until(async () => {
    const view = await json<{ result: { status: string } }>(await call("GET", `/v1/sessions/${name}/inputs/${inputId}`, { token: t }));
    return view.result.status === "done" ? true : undefined;
  }, `input ${inputId} done`, 1000);
}

export function sessionStub(tenant: string, name: string): DurableObjectStub<SessionObject> {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${tenant}:${name}`)) as unknown as DurableObjectStub<SessionObject>;
}
