/**
 * Every session as an MCP server (docs/mcp.md "Every session as an MCP server"): the tools a session
 * offers an MCP client, each implemented by calling one of the app's own HTTP routes with the caller's
 * Authorization header (`RouteCall`), so the role's rights, tenancy and every later access rule apply to
 * an MCP caller exactly as to an HTTP one. Stateless: one `McpServer` and one streamable-HTTP transport
 * per request, JSON responses (no SSE), no MCP session id; nothing lives between requests.
 *
 * JSON Schema validation uses the SDK's `@cfworker/json-schema` provider: the default (AJV) compiles
 * validators with `new Function`, which Workers refuse (and the bundle aliases AJV to a stub).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { z } from "zod";
import { MAX_WAIT_SECONDS } from "../../api/schemas.js";
import type { AcceptResponse, InputResponse } from "../../api/responses.js";
import type { Entry, JsonValue, Page } from "../../storage/records.js";
import { canonical } from "../session/config.js";

/** A request to one of the app's routes under `/v1/sessions/{session}`, with the caller's token. */
export type RouteCall = (
  method: "GET" | "POST",
  path: string,
  options?: { readonly body?: JsonValue; readonly idempotencyKey?: string },
) => Promise<Response>;

/** How long `send_message` waits for the answer when the caller does not say (seconds). */
export const DEFAULT_SEND_WAIT_SECONDS = 20;

const conversation = z
  .union([z.literal("root"), z.string().regex(/^[1-9][0-9]{0,15}$/), z.number().int().positive()])
  .optional()
  .describe('The conversation: "root" (the default) or a conversation id');
const requestKey = z
  .string()
  .min(1)
  .max(200)
  .optional()
  .describe(
    "An idempotency key: a retry with the same key is answered with the first acceptance and writes nothing (the HTTP Idempotency-Key header)",
  );

type Problem = {
  readonly code?: string;
  readonly detail?: string;
  readonly status?: number;
  readonly answer?: JsonValue;
};

function problemResult(problem: Problem, status: number): CallToolResult {
  const code = problem.code ?? `http_${status}`;
  return {
    isError: true,
    content: [{ type: "text", text: `${code}: ${problem.detail ?? "the request failed"}` }],
    structuredContent: { ...problem, code, status },
  };
}

function success(value: Record<string, unknown>, text?: string): CallToolResult {
  return { content: [{ type: "text", text: text ?? JSON.stringify(value) }], structuredContent: value };
}

/** A route's JSON body, or its problem as a tool error result. */
async function read<T>(
  response: Response,
): Promise<
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problem: Problem; readonly result: CallToolResult }
> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { detail: text.slice(0, 500) };
  }
  if (response.ok) return { ok: true, value: body as T };
  const problem = (typeof body === "object" && body !== null ? body : {}) as Problem;
  return { ok: false, problem, result: problemResult(problem, response.status) };
}

interface InputView {
  readonly inputId: number;
  readonly conversationId: number;
  readonly status: string;
  readonly result: JsonValue | undefined;
  readonly duplicate?: boolean;
  readonly answer?: string;
}

/** A send_message / get_result result: the answer's text when done, else how to poll. */
function inputResult(view: InputView): CallToolResult {
  const structured = Object.fromEntries(Object.entries(view).filter(([, v]) => v !== undefined));
  if (view.answer !== undefined) return success(structured, view.answer);
  const text =
    view.status === "queued" || view.status === "placed"
      ? `input ${view.inputId} is ${view.status}; call get_result with input_id ${view.inputId} for its answer`
      : `input ${view.inputId} is ${view.status}: ${JSON.stringify(view.result ?? null)}`;
  return success(structured, text);
}

/** The MCP server of one session, for one request. */
export function sessionMcpServer(session: string, call: RouteCall): McpServer {
  const server = new McpServer(
    { name: `pico-edge session ${session}`, version: "1" },
    {
      jsonSchemaValidator: new CfWorkerJsonSchemaValidator(),
      instructions:
        "An agent session. send_message gives it input and waits (bounded) for the answer; get_result polls an input; get_transcript reads a conversation; list_pending and respond_pending answer approvals and client tools.",
    },
  );

  server.registerTool(
    "send_message",
    {
      description: `Give the session an input and wait up to wait_seconds (default ${DEFAULT_SEND_WAIT_SECONDS}, at most ${MAX_WAIT_SECONDS}) for its answer. Returns the input id, and the answer text when the answer came within the wait; otherwise poll get_result with the input id.`,
      inputSchema: {
        conversation,
        input: z.string().min(1).describe("The user input"),
        wait_seconds: z
          .number()
          .int()
          .min(0)
          .max(MAX_WAIT_SECONDS)
          .optional()
          .describe("How long to wait for the answer, seconds"),
        request_key: requestKey,
      },
    },
    async (args) => {
      const wait = args.wait_seconds ?? DEFAULT_SEND_WAIT_SECONDS;
      const accepted = await read<AcceptResponse>(
        await call("POST", `/conversations/${args.conversation ?? "root"}/inputs?wait=${wait}`, {
          body: { input: args.input },
          ...(args.request_key === undefined ? {} : { idempotencyKey: args.request_key }),
        }),
      );
      if (!accepted.ok) return accepted.result;
      const value = accepted.value;
      const answer = value.outputText;
      return inputResult({
        inputId: value.inputId,
        conversationId: value.conversationId,
        status: value.status,
        result: value.result as JsonValue | undefined,
        duplicate: value.duplicate,
        ...(answer === undefined ? {} : { answer }),
      });
    },
  );

  server.registerTool(
    "get_result",
    {
      description: "An input's result: queued, placed, done (with the answer text) or unanswered (with the reason).",
      inputSchema: { input_id: z.number().int().positive().describe("The input id send_message returned") },
    },
    async (args) => {
      const found = await read<InputResponse>(await call("GET", `/inputs/${args.input_id}`));
      if (!found.ok) return found.result;
      const { inputId, conversationId, result, outputText: answer } = found.value;
      return inputResult({
        inputId,
        conversationId,
        status: result.status,
        result: result as unknown as JsonValue,
        ...(answer === undefined ? {} : { answer }),
      });
    },
  );

  server.registerTool(
    "get_transcript",
    {
      description:
        "A page of a conversation's transcript entries, oldest first after the cursor; `next` is the cursor of the following page.",
      inputSchema: {
        conversation,
        after: z.number().int().min(0).optional().describe("Entries after this entry id"),
        limit: z.number().int().min(1).max(1000).optional().describe("At most this many entries (default 100)"),
      },
    },
    async (args) => {
      const query = new URLSearchParams();
      if (args.after !== undefined) query.set("after", String(args.after));
      query.set("limit", String(args.limit ?? 100));
      const page = await read<Record<string, unknown>>(
        await call("GET", `/conversations/${args.conversation ?? "root"}/entries?${query.toString()}`),
      );
      return page.ok ? success(page.value) : page.result;
    },
  );

  server.registerTool(
    "list_pending",
    {
      description:
        "What waits for an answer in this session: approvals before a tool runs, and client tools waiting for their output.",
    },
    async () => {
      const list = await read<Record<string, unknown>>(await call("GET", "/pending"));
      return list.ok ? success(list.value) : list.result;
    },
  );

  server.registerTool(
    "respond_pending",
    {
      description:
        "Answer one pending item once: an approval with { approve, reason? }, a client tool with { output, isError? }.",
      inputSchema: {
        id: z
          .string()
          .min(1)
          .describe("The pending item's id, e.g. t12-approval-{incarnation} or t12-client-{incarnation}"),
        approve: z.boolean().optional().describe("An approval: approve (true) or deny (false)"),
        reason: z.string().optional().describe("An approval: the reason the model sees on a denial"),
        output: z.unknown().optional().describe("A client tool: its output (a string is the text)"),
        isError: z.boolean().optional().describe("A client tool: whether the output is an error"),
        request_key: requestKey.describe(
          "With a key, a retry whose answer equals the recorded one is answered as a duplicate instead of already_answered",
        ),
      },
    },
    async (args) => {
      const { id, request_key: key, ...rest } = args;
      const body = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as Record<
        string,
        JsonValue
      >;
      const answered = await read<Record<string, unknown>>(
        await call("POST", `/pending/${encodeURIComponent(id)}`, { body }),
      );
      if (answered.ok) return success({ ...answered.value, duplicate: false });
      // The item's id already makes an answer once-only; a keyed retry of the same answer is not an error.
      if (
        key !== undefined &&
        answered.problem.code === "already_answered" &&
        answered.problem.answer !== undefined &&
        canonical(answered.problem.answer) === canonical(body)
      ) {
        return success({ id, answer: answered.problem.answer, duplicate: true });
      }
      return answered.result;
    },
  );

  // McpServer advertises `tools.listChanged` as soon as a tool is registered. This server's list never
  // changes (the same tools on every request, whatever the session), so initialize says so and a client
  // need not wait for notifications/tools/list_changed that never come.
  server.server.registerCapabilities({ tools: { listChanged: false } });
  return server;
}

/** Answer one MCP request (a POST of JSON-RPC messages) for `session`. */
export async function serveMcp(request: Request, session: string, call: RouteCall): Promise<Response> {
  const server = sessionMcpServer(session, call);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request);
  } finally {
    // A JSON response is complete when handleRequest returns: nothing of this server outlives the request.
    await server.close();
  }
}
