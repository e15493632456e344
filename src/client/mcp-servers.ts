/**
 * The typed client's MCP servers (docs/mcp.md "MCP servers as tool sources"): an operator registers a
 * remote MCP server for the tenant, and sessions select its tools as `{server}__{tool}` in
 * `selectedTools`. Header values are write-only: the answers name the headers, never their values.
 * Build it over a PicoClient: `new McpServersClient(client)`.
 *
 * @example
 * const servers = new McpServersClient(client);
 * const github = await servers.put("github", { url: "https://mcp.example.com/mcp", headers: { authorization: "Bearer
 * ..." }, allowedTools: ["search_issues"] });
 * github.tools.filter((tool) => tool.selectableAs !== undefined); // what sessions may select
 */
import type {
  McpServerBody,
  McpServerDeletedResponse,
  McpServerListResponse,
  McpServerResponse,
} from "../api/mcp-servers.js";

/** Each operation and the client method that calls it (merged into CLIENT_OPERATIONS through src/client/tools.ts). */
export const MCP_SERVER_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putMcpServer: "McpServersClient.put",
  listMcpServers: "McpServersClient.list",
  getMcpServer: "McpServersClient.get",
  deleteMcpServer: "McpServersClient.delete",
  refreshMcpServer: "McpServersClient.refresh",
};

/** What the MCP servers client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface McpServersRequester {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T }>;
}

export class McpServersClient {
  readonly #client: McpServersRequester;
  readonly path = "/v1/mcp-servers";

  constructor(client: McpServersRequester) {
    this.#client = client;
  }

  /** The tenant's servers, by name. */
  async list(): Promise<McpServerListResponse> {
    return (await this.#client.request<McpServerListResponse>("GET", this.path)).body;
  }

  /** One server and its pinned tools (an unknown one throws 404 `mcp_server_not_found`). */
  async get(name: string): Promise<McpServerResponse> {
    return (await this.#client.request<McpServerResponse>("GET", this.#of(name))).body;
  }

  /**
   * Register or replace a server (the whole registration, header values too): its tool list is read
   * and pinned first; a server that does not answer as MCP throws 502 `mcp_server_unreachable`.
   */
  async put(name: string, registration: McpServerBody): Promise<McpServerResponse> {
    return (await this.#client.request<McpServerResponse>("PUT", this.#of(name), { body: registration })).body;
  }

  /** Read the server's tool list again and pin it (its `list_changed` notifications are not followed). */
  async refresh(name: string): Promise<McpServerResponse> {
    return (await this.#client.request<McpServerResponse>("POST", `${this.#of(name)}/refresh`)).body;
  }

  /** Remove a server: sessions may still select its tools, and their new calls settle as a tool error. */
  async delete(name: string): Promise<McpServerDeletedResponse> {
    return (await this.#client.request<McpServerDeletedResponse>("DELETE", this.#of(name))).body;
  }

  #of(name: string): string {
    return `${this.path}/${encodeURIComponent(name)}`;
  }
}
