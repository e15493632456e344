/**
 * Connecting to a remote MCP server (docs/mcp.md): the SDK's own `Client` over streamable HTTP (never
 * the old SSE transport), validating with the Workers-safe `@cfworker/json-schema` validator (no code
 * generation), every request through the host fetch seam. Nothing here is kept across requests: each
 * use opens a client, initializes afresh, does its work and closes, so a Durable Object woken from
 * hibernation needs no reconnect before it can list or call.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { hostFetch } from "../platform/host-config.js";

/** Where a server is and the headers (opened secrets) every request to it carries. */
export interface McpEndpoint {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** How this service names itself to MCP servers. */
export const MCP_CLIENT_INFO = { name: "pico-edge", version: "1.0.0" } as const;

/**
 * Open a client to `endpoint`, run `use`, and close it whatever happens. `signal` aborts the
 * connection's requests (the initialize handshake included).
 */
export async function withMcpClient<T>(
  endpoint: McpEndpoint,
  use: (client: Client) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const fetchVia = hostFetch();
  const client = new Client(MCP_CLIENT_INFO, { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() });
  const transport = new StreamableHTTPClientTransport(new URL(endpoint.url), {
    requestInit: { headers: { ...endpoint.headers } },
    fetch: (input, init) =>
      fetchVia(
        new Request(
          input,
          signal === undefined ? init : { ...init, signal: anySignal(signal, init?.signal ?? undefined) },
        ),
      ),
  });
  try {
    await client.connect(transport, signal === undefined ? undefined : { signal });
    return await use(client);
  } finally {
    await client.close().catch(() => undefined);
  }
}

function anySignal(a: AbortSignal, b: AbortSignal | undefined): AbortSignal {
  return b === undefined ? a : AbortSignal.any([a, b]);
}
