/**
 * The worker's side of a tenant's MCP servers (docs/mcp.md "MCP servers as tool sources"): sealing and
 * opening their header values, and reading a server's tool list into a pinned snapshot.
 *
 * Header values are secrets: sealed (AES-GCM, crypto/sealed-secrets.ts) for the context tenant / `mcp:{server}`
 * / the header's lower-case name, stored sealed in the tenant's DirectoryObject, and opened only here,
 * when a request to the server is about to be made (`mcpEndpoint`, for the call path; a refresh). No
 * answer, problem detail or log line carries a value: a failure reaching the server is reported with
 * every header value (and the parts of one, remote/redaction.ts) redacted from the error's text.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { MCP_SERVER_LIMITS } from "../../api/mcp-servers.js";
import { directoryStub } from "../directory/object.js";
import type { Env } from "../env.js";
import { withMcpClient, type McpEndpoint } from "./mcp-connect.js";
import { snapshotHash, snapshotTool, sortedTools, type SnapshotTool } from "../directory/mcp-snapshot.js";
import { Problem } from "../problems.js";
import { redactedDetail, redactor } from "./redaction.js";
import { openSecret, sealSecret, type SealContext, type SealedSecret } from "../crypto/sealed-secrets.js";

/** How long a PUT or refresh waits for the server's whole tool list. */
export const MCP_LIST_TIMEOUT_MS = 20_000;

/** What a header value of a server is sealed for. */
export function mcpSealContext(tenant: string, server: string, header: string): SealContext {
  return { tenant, owner: `mcp:${server}`, field: header.toLowerCase() };
}

/** Seal each header value (names lower-cased). */
export async function sealHeaders(
  env: Env,
  tenant: string,
  server: string,
  headers: Readonly<Record<string, string>>,
): Promise<Record<string, SealedSecret>> {
  const out: Record<string, SealedSecret> = {};
  for (const [name, value] of Object.entries(headers))
    out[name.toLowerCase()] = await sealSecret(env, mcpSealContext(tenant, server, name), value);
  return out;
}

/** Open sealed header values (a blob that does not open is 500 `misconfigured`, never naming a value). */
export async function openHeaders(
  env: Env,
  tenant: string,
  server: string,
  sealed: Readonly<Record<string, SealedSecret>>,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, blob] of Object.entries(sealed))
    out[name] = await openSecret(env, mcpSealContext(tenant, server, name), blob);
  return out;
}

/**
 * Where the tenant's registered server is and the headers (opened) every request to it carries;
 * undefined when the tenant has no such server (deleted since the call was captured). This is the one
 * way the call path opens a server's header values: call it right before the request, keep the result
 * no longer than the request.
 */
export async function mcpEndpoint(env: Env, tenant: string, server: string): Promise<McpEndpoint | undefined> {
  const secrets = await directoryStub(env, tenant).mcpServerSecrets(server);
  if (secrets === undefined) return undefined;
  return { url: secrets.url, headers: await openHeaders(env, tenant, server, secrets.headers) };
}

/** A server's whole tool list (every page) and its content hash. */
export interface ToolList {
  readonly tools: readonly SnapshotTool[];
  readonly snapshot: string;
}

/**
 * Read the server's tool list: connect (initialize afresh), `tools/list` following `nextCursor`, close.
 * Throws 502 `mcp_server_unreachable` when the server does not answer as MCP (the error's text with
 * every header value redacted) and 422 `invalid_mcp_server` (field `url`) when its list is over the
 * limits of MCP_SERVER_LIMITS.
 */
export async function readToolList(endpoint: McpEndpoint): Promise<ToolList> {
  let listed: SnapshotTool[];
  try {
    listed = await withMcpClient(endpoint, listAll, AbortSignal.timeout(MCP_LIST_TIMEOUT_MS));
  } catch (error) {
    if (error instanceof Problem) throw error;
    throw new Problem(
      "mcp_server_unreachable",
      `the server at ${endpoint.url} did not answer as an MCP server: ${describe(error, endpoint.headers)}`,
      "url",
    );
  }
  const tools = sortedTools(listed);
  const bytes = new TextEncoder().encode(JSON.stringify(tools)).length;
  if (bytes > MCP_SERVER_LIMITS.snapshotBytes) {
    throw new Problem(
      "invalid_mcp_server",
      `url: the server's tool list is ${bytes} bytes of JSON; at most ${MCP_SERVER_LIMITS.snapshotBytes}`,
      "url",
    );
  }
  return { tools, snapshot: await snapshotHash(tools) };
}

async function listAll(client: Client): Promise<SnapshotTool[]> {
  const tools: SnapshotTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MCP_SERVER_LIMITS.pages; page++) {
    const result = await client.listTools(cursor === undefined ? undefined : { cursor });
    tools.push(...result.tools.map(snapshotTool));
    if (tools.length > MCP_SERVER_LIMITS.tools) {
      throw new Problem(
        "invalid_mcp_server",
        `url: the server lists more than ${MCP_SERVER_LIMITS.tools} tools`,
        "url",
      );
    }
    cursor = result.nextCursor;
    if (cursor === undefined) return tools;
  }
  throw new Problem(
    "invalid_mcp_server",
    `url: the server's tool list has more than ${MCP_SERVER_LIMITS.pages} pages`,
    "url",
  );
}

/** The error's text, every header value (and part of one) redacted before it is shortened (so no cut value survives). */
function describe(error: unknown, headers: Readonly<Record<string, string>>): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return redactedDetail(text, redactor({ secrets: Object.values(headers) }), 300);
}
