/**
 * The typed client's tool catalog (docs/tools.md): an operator defines the tenant's own tools, which
 * sessions then select by name in `selectedTools` like the built-in ones. Reached from the client:
 * `client.tools()`. Each record carries its `version`; pass it as `ifMatch` to change or delete only
 * the version you read (a mismatch throws PicoApiError 412 `precondition_failed`).
 *
 * @example
 * const tools = client.tools();
 * await tools.put("lookup_order", { description: "Look up an order", parameters: { type: "object", properties: { id: {
 * type: "integer" } } }, handler: { type: "http", url: "https://example.com/tools" } });
 */
import type {
  ToolDefinitionBody,
  ToolDeletedResponse,
  ToolPutResponse,
  ToolRecordResponse,
  ToolSecretRotatedResponse,
  ToolsListResponse,
} from "../api/tools.js";
import { MCP_SERVER_CLIENT_OPERATIONS } from "./mcp-servers.js";

/**
 * Each operation of the tool sources (the catalog, MCP servers) and the client method that calls it (merged into
 * CLIENT_OPERATIONS).
 */
export const TOOLS_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  putTool: "ToolsClient.put",
  listTools: "ToolsClient.list",
  getTool: "ToolsClient.get",
  deleteTool: "ToolsClient.delete",
  rotateToolSecret: "ToolsClient.rotateSecret",
  ...MCP_SERVER_CLIENT_OPERATIONS,
};

/** What the tools client needs of PicoClient (its `request`), so this file does not import the client's. */
export interface ToolsRequester {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T }>;
}

export interface ToolWriteOptions {
  /** Only if the tool is at this version (its record's `version`), or `"*"`: only if it exists. */
  readonly ifMatch?: number | "*";
}

export class ToolsClient {
  readonly #client: ToolsRequester;
  readonly path = "/v1/tools";

  constructor(client: ToolsRequester) {
    this.#client = client;
  }

  /** The tenant's live tools, by name. */
  async list(): Promise<ToolsListResponse> {
    return (await this.#client.request<ToolsListResponse>("GET", this.path)).body;
  }

  /** One live tool (a deleted tool throws 404 `tool_not_found`). */
  async get(name: string): Promise<ToolRecordResponse> {
    return (await this.#client.request<ToolRecordResponse>("GET", `${this.path}/${encodeURIComponent(name)}`)).body;
  }

  /**
   * Define or replace a tool; the answer is the stored record, every default filled in, and the first time it is an
   * HTTP tool its signing secret (`secret`).
   */
  async put(name: string, definition: ToolDefinitionBody, options: ToolWriteOptions = {}): Promise<ToolPutResponse> {
    return (
      await this.#client.request<ToolPutResponse>("PUT", `${this.path}/${encodeURIComponent(name)}`, {
        body: definition,
        headers: conditional(options),
      })
    ).body;
  }

  /** Rotate an HTTP tool's signing secret: the new one (answered this once); the previous verifies late results 7 days. */
  async rotateSecret(name: string): Promise<ToolSecretRotatedResponse> {
    return (
      await this.#client.request<ToolSecretRotatedResponse>(
        "POST",
        `${this.path}/${encodeURIComponent(name)}/rotate-secret`,
      )
    ).body;
  }

  /** Delete a tool: sessions may still select it, and its new calls settle as a tool error. */
  async delete(name: string, options: ToolWriteOptions = {}): Promise<ToolDeletedResponse> {
    return (
      await this.#client.request<ToolDeletedResponse>("DELETE", `${this.path}/${encodeURIComponent(name)}`, {
        headers: conditional(options),
      })
    ).body;
  }
}

function conditional(options: ToolWriteOptions): Record<string, string> {
  return options.ifMatch === undefined ? {} : { "if-match": options.ifMatch === "*" ? "*" : `"${options.ifMatch}"` };
}
