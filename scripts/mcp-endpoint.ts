/**
 * `npm run mcp-endpoint` runs a small MCP server on http://127.0.0.1:8789/mcp, the server of the MCP walk
 * (README "MCP", docs/mcp.md). It is a real MCP server built with the SDK's own server classes over
 * streamable HTTP, stateless (a fresh server per request, no MCP session id), and it refuses any request
 * without `Authorization: Bearer <--token>` (default `demo-secret`): register it with that header, which
 * the Worker stores sealed and sends on every request.
 *
 * Tools:
 *   search_issues {query}        a short list of made-up issues matching the query (read-only, idempotent)
 *   create_issue {title}         "creates" an issue and answers its number (not idempotent)
 *   slow_report {steps?}         sends a progress notification every --step-ms (default 1000) for `steps`
 *                                steps (default 5), then answers
 *
 * GET /calls answers {"items": [...]} every tools/call seen, in order. Flags: --port (8789), --token,
 * --step-ms. Run by Node directly (type stripping); it imports nothing from src/.
 */
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { flags } from "./dev-secrets.ts";

export interface McpEndpointOptions {
  readonly port: number;
  readonly token: string;
  readonly stepMs: number;
  readonly log?: (line: string) => void;
}

/** A tools/call the endpoint answered. */
export interface SeenCall {
  readonly at: number;
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
}

export interface McpEndpoint {
  readonly url: string;
  readonly calls: readonly SeenCall[];
  close(): Promise<void>;
}

const TOOLS = [
  {
    name: "search_issues",
    description: "Search the issue tracker; answers matching issues",
    inputSchema: {
      type: "object" as const,
      properties: { query: { type: "string", minLength: 1 } },
      required: ["query"],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true },
  },
  {
    name: "create_issue",
    description: "Open a new issue; answers its number",
    inputSchema: {
      type: "object" as const,
      properties: { title: { type: "string", minLength: 1 } },
      required: ["title"],
      additionalProperties: false,
    },
    annotations: { idempotentHint: false },
  },
  {
    name: "slow_report",
    description: "Build a report slowly, reporting progress",
    inputSchema: {
      type: "object" as const,
      properties: { steps: { type: "integer", minimum: 1, maximum: 60 } },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, idempotentHint: true },
  },
];

function text(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: { result: value } };
}

export function startMcpEndpoint(options: McpEndpointOptions): Promise<McpEndpoint> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const calls: SeenCall[] = [];
  let next = 100;

  const mcpServer = (): Server => {
    const server = new Server({ name: "pico-edge-demo", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      calls.push({ at: Date.now(), tool: name, arguments: args });
      log(`tools/call ${name} ${JSON.stringify(args)}`);
      switch (name) {
        case "search_issues": {
          const query = String(args["query"] ?? "");
          return text([
            { number: 41, title: `Crash when ${query} is empty`, state: "open" },
            { number: 7, title: `Document ${query}`, state: "closed" },
          ]);
        }
        case "create_issue":
          next += 1;
          return text({ number: next, title: String(args["title"] ?? "") });
        case "slow_report": {
          const steps = typeof args["steps"] === "number" ? args["steps"] : 5;
          const token = request.params._meta?.progressToken;
          for (let step = 1; step <= steps; step++) {
            await new Promise((resolve) => setTimeout(resolve, options.stepMs));
            if (token !== undefined)
              await extra.sendNotification({
                method: "notifications/progress",
                params: { progressToken: token, progress: step, total: steps },
              });
          }
          return text({ steps, summary: "all green" });
        }
        default:
          return { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true };
      }
    });
    return server;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? "/", "http://endpoint").pathname;
    if (req.method === "GET" && path === "/calls") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ items: calls }));
      return;
    }
    if (path !== "/mcp") {
      res
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ error: "POST /mcp; GET /calls" }));
      return;
    }
    if (req.headers.authorization !== `Bearer ${options.token}`) {
      log(`refused a request without the bearer token`);
      res
        .writeHead(401, { "content-type": "application/json" })
        .end(JSON.stringify({ error: "Authorization: Bearer <token> is required" }));
      return;
    }
    const server = mcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };

  const http: HttpServer = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(`error: ${error instanceof Error ? error.message : String(error)}`);
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  return new Promise((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.port, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${options.port}/mcp`,
        calls,
        close: () => new Promise<void>((done) => http.close(() => done())),
      });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const args = flags(process.argv.slice(2));
    const port = Number(args.get("port") ?? 8789);
    const stepMs = Number(args.get("step-ms") ?? 1000);
    if (!Number.isSafeInteger(port) || port <= 0 || port > 65_535) throw new Error("--port is a TCP port");
    if (!Number.isSafeInteger(stepMs) || stepMs < 0) throw new Error("--step-ms is a whole number of milliseconds");
    const endpoint = await startMcpEndpoint({ port, token: args.get("token") ?? "demo-secret", stepMs });
    process.stdout.write(
      `MCP server on ${endpoint.url} (tools: ${TOOLS.map((t) => t.name).join(", ")}); GET /calls lists the calls\n`,
    );
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
