/**
 * A tenant's remote MCP servers as tool sources (docs/mcp.md "MCP servers as tool sources"), kept by
 * the tenant's DirectoryObject (directory/mcp.ts):
 *
 *   PUT    /v1/mcp-servers/:server          (operator) { url, headers?, allowedTools?, approval? } -> 201 / 200
 *   GET    /v1/mcp-servers                (operator) { items }
 *   GET    /v1/mcp-servers/:server          (operator) the registration and its pinned tools; 404 mcp_server_not_found
 *   DELETE /v1/mcp-servers/:server          (operator) { name, deleted: true, version }; 404
 *   POST   /v1/mcp-servers/:server/refresh  (operator) re-read the tool list -> the registration
 *
 * A PUT is checked (422 `invalid_mcp_server` naming the field), its header values sealed, and the
 * server's tool list read (502 `mcp_server_unreachable` when it does not answer as MCP) before anything
 * is written. A refresh that cannot read the list keeps the old snapshot. Header values are never
 * answered: the registration shows their names.
 */
import { Hono } from "hono";
import { z } from "zod";
import { mcpServerBody, mcpServerName, type McpServerResponse } from "../../../api/mcp-servers.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import { openHeaders, readToolList, sealHeaders } from "../../remote/mcp-servers.js";
import { selectTools, type McpServerRecord } from "../../directory/mcp-snapshot.js";
import { Problem } from "../../problems.js";
import { isDevelopment } from "../../env.js";
import { noQuery, parse } from "../../schemas.js";
import { body, query, type AppContext } from "./shared.js";

function directory(c: AppContext): ReturnType<typeof directoryStub> {
  return directoryStub(c.env, c.get("claims").tenant);
}

function notFound(name: string): Problem {
  return new Problem("mcp_server_not_found", `the tenant has no MCP server ${JSON.stringify(name)}`);
}

/** The `:server` of a read, delete or refresh: a name no PUT accepts names no server. */
function nameParam(c: AppContext): string {
  const name = c.req.param("server") ?? "";
  if (!mcpServerName.safeParse(name).success) throw notFound(name);
  return name;
}

/** Plain `http:` only where ENVIRONMENT is development (`npm start`). */
function checkUrl(c: AppContext, url: string): void {
  if (new URL(url).protocol !== "https:" && !isDevelopment(c.env.ENVIRONMENT)) {
    throw new Problem(
      "invalid_mcp_server",
      "url: an https: URL (plain http: only where ENVIRONMENT is development)",
      "url",
    );
  }
}

/** What the routes answer: the registration (header names only) and each pinned tool's selectability. */
export function mcpServerView(record: McpServerRecord): McpServerResponse {
  return {
    name: record.name,
    url: record.url,
    headers: [...record.headerNames],
    ...(record.allowedTools === undefined ? {} : { allowedTools: [...record.allowedTools] }),
    approval: record.approval,
    version: record.version,
    snapshot: record.snapshot,
    refreshedAt: record.refreshedAt,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    tools: selectTools(record).map((selection) => ({
      ...selection.tool,
      ...("name" in selection ? { selectableAs: selection.name } : { reason: selection.reason }),
    })),
  };
}

export const mcpServerRoutes = new Hono<AppEnv>();

mcpServerRoutes.put("/:server", requires("mcp"), async (c) => {
  query(c, noQuery);
  const name = parse(mcpServerName, c.req.param("server") ?? "", "invalid_mcp_server", "name");
  const input = parse(mcpServerBody, await body(c, z.unknown()), "invalid_mcp_server");
  checkUrl(c, input.url);
  const tenant = c.get("claims").tenant;
  const headers = Object.fromEntries(
    Object.entries(input.headers ?? {}).map(([key, value]) => [key.toLowerCase(), value]),
  );
  const sealed = await sealHeaders(c.env, tenant, name, headers);
  const list = await readToolList({ url: input.url, headers });
  const outcome = await directory(c).putMcpServer({
    name,
    url: input.url,
    headers: sealed,
    ...(input.allowedTools === undefined ? {} : { allowedTools: input.allowedTools }),
    approval: input.approval ?? "never",
    tools: list.tools,
    snapshot: list.snapshot,
  });
  switch (outcome.type) {
    case "stored":
      return c.json(mcpServerView(outcome.record), outcome.created ? 201 : 200);
    case "too_many":
      throw new Problem(
        "invalid_mcp_server",
        `name: the tenant registers at most ${outcome.limit} MCP servers; delete one first`,
        "name",
      );
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

mcpServerRoutes.get("/", requires("mcp"), async (c) => {
  query(c, noQuery);
  return c.json({ items: (await directory(c).listMcpServers()).map(mcpServerView) });
});

mcpServerRoutes.get("/:server", requires("mcp"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const record = await directory(c).getMcpServer(name);
  if (record === undefined) throw notFound(name);
  return c.json(mcpServerView(record));
});

mcpServerRoutes.delete("/:server", requires("mcp"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const outcome = await directory(c).deleteMcpServer(name);
  switch (outcome.type) {
    case "deleted":
      return c.json({ name: outcome.name, deleted: true as const, version: outcome.version });
    case "not_found":
      throw notFound(name);
    default: {
      const never: never = outcome;
      return never;
    }
  }
});

mcpServerRoutes.post("/:server/refresh", requires("mcp"), async (c) => {
  query(c, noQuery);
  const name = nameParam(c);
  const stub = directory(c);
  const secrets = await stub.mcpServerSecrets(name);
  if (secrets === undefined) throw notFound(name);
  const tenant = c.get("claims").tenant;
  const list = await readToolList({
    url: secrets.url,
    headers: await openHeaders(c.env, tenant, name, secrets.headers),
  });
  const outcome = await stub.refreshMcpServer(name, secrets.revision, list);
  switch (outcome.type) {
    case "refreshed":
    case "superseded":
      return c.json(mcpServerView(outcome.record));
    case "not_found":
      throw notFound(name);
    default: {
      const never: never = outcome;
      return never;
    }
  }
});
