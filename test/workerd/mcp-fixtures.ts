/**
 * A real MCP server for the tests, built with the SDK's own server classes (`Server` and the Web-standard
 * streamable HTTP transport), served through the host fetch seam (`installSeams({ fetch })`) at
 * `${MCP_ORIGIN}/{name}/mcp`. Each request gets a fresh server (stateless, as a Workers-hosted MCP
 * server would be), so the server's tool list can change between requests the way a product's does.
 *
 * Tools are scripted per test: a tool's `run` gets the arguments and a `progress` function (sends a
 * `notifications/progress` when the caller asked for progress), and may hang until the request is
 * aborted. Every request and every `tools/call` is recorded, so a test can count what reached the server.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";

export const MCP_ORIGIN = "https://mcp.example.test";

/** One tool as the server lists it. */
export interface McpTestTool {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the arguments (`type: "object"`). */
  readonly inputSchema: Record<string, unknown>;
  readonly annotations?: {
    readonly idempotentHint?: boolean;
    readonly readOnlyHint?: boolean;
    readonly destructiveHint?: boolean;
  };
  /**
   * The result; `"hang"` never answers (until the request is aborted). `extra` is the SDK's request context (to send
   * the client a request).
   */
  readonly run?: (
    args: Record<string, unknown>,
    progress: (value: number, total?: number) => Promise<void>,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ) => Promise<CallToolResult | "hang"> | CallToolResult | "hang";
}

/** A `tools/call` that reached the server. */
export interface SeenCall {
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
  readonly headers: Record<string, string>;
}

export class McpTestServer {
  readonly name: string;
  /** Every HTTP request (method and JSON-RPC method, when there is one). */
  readonly requests: {
    readonly method: string;
    readonly rpc: string | undefined;
    readonly headers: Record<string, string>;
  }[] = [];
  readonly calls: SeenCall[] = [];
  #tools = new Map<string, McpTestTool>();
  /** Answer `application/json` instead of an SSE stream (progress needs the stream). */
  json = false;

  constructor(name: string, tools: readonly McpTestTool[] = []) {
    this.name = name;
    this.setTools(tools);
  }

  /** The server's URL (what an operator registers). */
  get url(): string {
    return `${MCP_ORIGIN}/${this.name}/mcp`;
  }

  /** Replace the tool list (the next `tools/list` sees it; the server does not notify anyone). */
  setTools(tools: readonly McpTestTool[]): this {
    this.#tools = new Map(tools.map((t) => [t.name, t]));
    return this;
  }

  callsOf(tool: string): SeenCall[] {
    return this.calls.filter((c) => c.tool === tool);
  }

  /** Whether this server serves the request's URL. */
  serves(request: Request): boolean {
    return request.url.startsWith(this.url);
  }

  readonly fetch = async (request: Request): Promise<Response> => {
    const headers = Object.fromEntries(request.headers);
    let rpc: string | undefined;
    let body: unknown;
    if (request.method === "POST") {
      body = await request.json();
      rpc =
        !Array.isArray(body) && typeof body === "object" && body !== null && "method" in body
          ? String((body as { method: unknown }).method)
          : undefined;
    }
    this.requests.push({ method: request.method, rpc, headers });
    const server = this.#server(headers);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: this.json,
    });
    await server.connect(transport);
    return transport.handleRequest(request, { parsedBody: body });
  };

  #server(headers: Record<string, string>): Server {
    const server = new Server(
      { name: this.name, version: "1.0.0" },
      { capabilities: { tools: { listChanged: true } }, jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [...this.#tools.values()].map((t) => ({
        name: t.name,
        ...(t.description === undefined ? {} : { description: t.description }),
        inputSchema: { type: "object" as const, ...t.inputSchema },
        ...(t.annotations === undefined ? {} : { annotations: { ...t.annotations } }),
      })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      this.calls.push({ tool: name, arguments: args, headers });
      const tool = this.#tools.get(name);
      if (tool === undefined) return { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true };
      const token = request.params._meta?.progressToken;
      const progress = async (value: number, total?: number): Promise<void> => {
        if (token === undefined) return;
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: value, ...(total === undefined ? {} : { total }) },
        });
      };
      const result = await (tool.run ?? (() => ({ content: [{ type: "text" as const, text: JSON.stringify(args) }] })))(
        args,
        progress,
        extra,
      );
      if (result === "hang") {
        return new Promise<CallToolResult>((_resolve, reject) => {
          extra.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
        });
      }
      return result;
    });
    return server;
  }
}

/** A fetch seam serving several test servers (anything else is a 404). */
export function mcpFetch(...servers: readonly McpTestServer[]): (request: Request) => Promise<Response> {
  return async (request) => {
    const server = servers.find((s) => s.serves(request));
    return server === undefined ? new Response("not found", { status: 404 }) : server.fetch(request);
  };
}
