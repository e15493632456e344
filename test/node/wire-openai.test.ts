/**
 * OpenAI-style APIs on the wire (docs/models.md "Wire tests"): pi-ai's real providers against a local fake endpoint
 * that
 * answers in each API's documented streaming format. OpenAI Responses (the catalogue `openai`
 * provider, and a custom `openai-responses` endpoint), Chat Completions (a custom endpoint declared in
 * configuration; both custom ones are built with createProvider) and Cloudflare Workers AI (the
 * catalogue provider: Chat Completions under the account's REST path). Per wire: request bodies (tools, thinking,
 * system), entries, usage rows, retry timing on a fake
 * clock, a 500, a context overflow and a cut stream.
 */
import { describe, expect, it } from "vitest";
import {
  acceptAndDrive,
  expectOverflowSettles,
  expectWaitsExactly,
  assistants,
  call,
  expectKeylessAnswer,
  generationState,
  IDENTITY,
  useProfile,
  jsonError,
  openRoute,
  openWire,
  resultOf,
  retrySleep,
  sse,
  usageRows,
  useFakeEndpoint,
  type RecordedRequest,
  type WireRoute,
} from "./wire-fixtures.js";

// ---------------------------------------------------------------------------------------------
// Chat Completions (custom endpoint, Workers AI)

function chunk(delta: Record<string, unknown>, finish: string | null = null): readonly [null, unknown] {
  return [
    null,
    {
      id: "chatcmpl-1",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model: "m",
      choices: [{ index: 0, delta, finish_reason: finish }],
    },
  ];
}

function usageChunk(input: number, output: number): readonly [null, unknown] {
  return [
    null,
    {
      id: "chatcmpl-1",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model: "m",
      choices: [],
      usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
    },
  ];
}

function completionsAnswer(
  text: string,
  options: { thinking?: string; input?: number; output?: number } = {},
): string[] {
  return sse(
    [
      chunk({ role: "assistant", content: "" }),
      ...(options.thinking === undefined ? [] : [chunk({ reasoning_content: options.thinking })]),
      chunk({ content: text.slice(0, 3) }),
      chunk({ content: text.slice(3) }),
      chunk({}, "stop"),
      usageChunk(options.input ?? 120, options.output ?? 42),
    ],
    true,
  );
}

function completionsTwoCalls(): string[] {
  return sse(
    [
      chunk({ role: "assistant", content: null }),
      chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "echo", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"text":"ping"}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "echo", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"text":"pong"}' } }] }),
      chunk({}, "tool_calls"),
      usageChunk(200, 30),
    ],
    true,
  );
}

// ---------------------------------------------------------------------------------------------
// Responses (catalogue OpenAI)

function responsesAnswer(text: string, options: { thinking?: string; input?: number; output?: number } = {}): string[] {
  const events: [string, unknown][] = [
    [
      "response.created",
      {
        type: "response.created",
        sequence_number: 0,
        response: { id: "resp_1", object: "response", status: "in_progress", model: "gpt-5-mini", output: [] },
      },
    ],
  ];
  let index = 0;
  if (options.thinking !== undefined) {
    events.push([
      "response.output_item.added",
      { type: "response.output_item.added", output_index: index, item: { type: "reasoning", id: "rs_1", summary: [] } },
    ]);
    events.push([
      "response.reasoning_summary_text.delta",
      {
        type: "response.reasoning_summary_text.delta",
        item_id: "rs_1",
        output_index: index,
        summary_index: 0,
        delta: options.thinking,
      },
    ]);
    events.push([
      "response.output_item.done",
      {
        type: "response.output_item.done",
        output_index: index,
        item: { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: options.thinking }] },
      },
    ]);
    index += 1;
  }
  events.push([
    "response.output_item.added",
    {
      type: "response.output_item.added",
      output_index: index,
      item: { type: "message", id: "msg_1", role: "assistant", status: "in_progress", content: [] },
    },
  ]);
  events.push([
    "response.output_text.delta",
    {
      type: "response.output_text.delta",
      item_id: "msg_1",
      output_index: index,
      content_index: 0,
      delta: text.slice(0, 3),
    },
  ]);
  events.push([
    "response.output_text.delta",
    {
      type: "response.output_text.delta",
      item_id: "msg_1",
      output_index: index,
      content_index: 0,
      delta: text.slice(3),
    },
  ]);
  events.push([
    "response.output_item.done",
    {
      type: "response.output_item.done",
      output_index: index,
      item: {
        type: "message",
        id: "msg_1",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text, annotations: [] }],
      },
    },
  ]);
  events.push([
    "response.completed",
    {
      type: "response.completed",
      response: {
        id: "resp_1",
        object: "response",
        status: "completed",
        model: "gpt-5-mini",
        output: [],
        usage: {
          input_tokens: options.input ?? 120,
          output_tokens: options.output ?? 42,
          total_tokens: (options.input ?? 120) + (options.output ?? 42),
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
      },
    },
  ]);
  return sse(events);
}

function responsesTwoCalls(): string[] {
  const events: [string, unknown][] = [
    [
      "response.created",
      {
        type: "response.created",
        response: { id: "resp_2", object: "response", status: "in_progress", model: "gpt-5-mini", output: [] },
      },
    ],
  ];
  ["ping", "pong"].forEach((word, index) => {
    const item = {
      type: "function_call",
      id: `fc_${index + 1}`,
      call_id: `call_${index + 1}`,
      name: "echo",
      arguments: "",
    };
    events.push(["response.output_item.added", { type: "response.output_item.added", output_index: index, item }]);
    events.push([
      "response.function_call_arguments.delta",
      {
        type: "response.function_call_arguments.delta",
        item_id: item.id,
        output_index: index,
        delta: `{"text":"${word}"}`,
      },
    ]);
    events.push([
      "response.output_item.done",
      {
        type: "response.output_item.done",
        output_index: index,
        item: { ...item, arguments: `{"text":"${word}"}`, status: "completed" },
      },
    ]);
  });
  events.push([
    "response.completed",
    {
      type: "response.completed",
      response: {
        id: "resp_2",
        object: "response",
        status: "completed",
        model: "gpt-5-mini",
        output: [],
        usage: { input_tokens: 200, output_tokens: 30, total_tokens: 230, input_tokens_details: { cached_tokens: 0 } },
      },
    },
  ]);
  return sse(events);
}

// ---------------------------------------------------------------------------------------------
// The wires

interface Wire extends WireRoute {
  readonly authorization: string;
  answer(text: string, options?: { thinking?: string; input?: number; output?: number }): string[];
  twoCalls(): string[];
  /** The body field that carries a "high" thinking level, as this API spells it. */
  thinkingHigh(body: Record<string, unknown>): unknown;
  expectedThinking: unknown;
  toolNames(body: Record<string, unknown>): string[];
  toolResultIds(request: RecordedRequest | undefined): string[];
}

const completionsTools = (body: Record<string, unknown>): string[] =>
  ((body["tools"] as { function: { name: string } }[] | undefined) ?? []).map((t) => t.function.name);
const completionsResults = (request: RecordedRequest | undefined): string[] =>
  ((request?.body["messages"] as { role: string; tool_call_id?: string }[] | undefined) ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => m.tool_call_id ?? "");

/** What the two Responses wires share: the API's path, stream format and body fields. */
const responsesApi = {
  path: /^\/v1\/responses$/,
  answer: responsesAnswer,
  twoCalls: responsesTwoCalls,
  thinkingHigh: (body: Record<string, unknown>) => (body["reasoning"] as { effort?: string } | undefined)?.effort,
  expectedThinking: "high",
  toolNames: (body: Record<string, unknown>) =>
    ((body["tools"] as { name: string }[] | undefined) ?? []).map((t) => t.name),
  toolResultIds: (request: RecordedRequest | undefined) =>
    ((request?.body["input"] as { type: string; call_id?: string }[] | undefined) ?? [])
      .filter((i) => i.type === "function_call_output")
      .map((i) => i.call_id ?? ""),
} as const;

/** What the two Chat Completions wires share. */
const completionsApi = {
  answer: completionsAnswer,
  twoCalls: completionsTwoCalls,
  thinkingHigh: (body: Record<string, unknown>) => body["reasoning_effort"],
  expectedThinking: "high",
  toolNames: completionsTools,
  toolResultIds: completionsResults,
} as const;

const wires: readonly Wire[] = [
  {
    name: "OpenAI Responses (catalogue openai)",
    model: "openai/gpt-5-mini",
    secrets: { OPENAI_API_KEY: "sk-openai-test" },
    ...responsesApi,
    authorization: "Bearer sk-openai-test",
  },
  {
    name: "OpenAI Responses (a custom openai-responses endpoint from configuration)",
    model: "company-gw/gpt-compatible",
    secrets: { COMPANY_GW_KEY: "gw-key-test" },
    custom: (endpoint) => [
      {
        id: "company-gw",
        baseUrl: `${endpoint.url}/v1`,
        api: "openai-responses",
        keySecret: "COMPANY_GW_KEY",
        models: [{ id: "gpt-compatible", reasoning: true }],
      },
    ],
    ...responsesApi,
    authorization: "Bearer gw-key-test",
  },
  {
    name: "Chat Completions (a custom endpoint from configuration)",
    model: "local-vllm/qwen3-32b",
    secrets: { LOCAL_VLLM_KEY: "sk-local-test" },
    custom: (endpoint) => [
      {
        id: "local-vllm",
        baseUrl: `${endpoint.url}/v1`,
        api: "openai-completions",
        keySecret: "LOCAL_VLLM_KEY",
        models: [{ id: "qwen3-32b", reasoning: true, contextWindow: 32_768 }],
      },
    ],
    path: /^\/v1\/chat\/completions$/,
    authorization: "Bearer sk-local-test",
    ...completionsApi,
  },
  {
    name: "Cloudflare Workers AI (catalogue, REST API)",
    model: "cloudflare-workers-ai/@cf/openai/gpt-oss-120b",
    secrets: { CLOUDFLARE_API_KEY: "cf-token-test", CLOUDFLARE_ACCOUNT_ID: "acct-1" },
    path: /^\/client\/v4\/accounts\/acct-1\/ai\/v1\/chat\/completions$/,
    authorization: "Bearer cf-token-test",
    ...completionsApi,
  },
];

const endpoint = useFakeEndpoint();

for (const wire of wires) {
  const open = (extra: { thinking?: string } = {}) => openRoute(wire, endpoint, extra);

  describe(`${wire.name} on the wire`, () => {
    it("thinking high reaches the API's reasoning field; system section and tools in the body; thinking + text in the answer; usage recorded", async () => {
      endpoint.reply({ chunks: wire.answer("Hello there", { thinking: "Let me think." }) });
      const rig = await open({ thinking: "high" });
      await (await rig.harness.root(call)).prompt({ input: "hello" }, call);
      expect(endpoint.requests).toHaveLength(1);
      const [request] = endpoint.requests;
      expect(request?.path).toMatch(wire.path);
      expect(request?.headers["authorization"]).toBe(wire.authorization);
      const body = request?.body ?? {};
      expect(wire.thinkingHigh(body)).toBe(wire.expectedThinking);
      expect(body["stream"]).toBe(true);
      expect(wire.toolNames(body)).toEqual(["echo"]);
      expect(JSON.stringify(body)).toContain(IDENTITY);
      const [answer] = await assistants(rig);
      expect(answer?.content.map((b) => b.type)).toEqual(["thinking", "text"]);
      expect(answer?.content[0]).toMatchObject({ thinking: "Let me think." });
      expect(answer?.content[1]).toMatchObject({ text: "Hello there" });
      const rows = await usageRows(rig);
      expect(rows).toHaveLength(1);
      expect(rows[0]?.usage).toMatchObject({ input: 120, output: 42 });
    });

    it("a profile's text is the request's leading system or developer message, its variables filled in", async () => {
      endpoint.reply({ chunks: wire.answer("Hi") });
      const rig = await open();
      await useProfile(rig, "You are the support agent of {{company}}.", { company: "Acme" });
      await (await rig.harness.root(call)).prompt({ input: "hello" }, call);
      const body = endpoint.requests[0]?.body ?? {};
      const items = (body["messages"] ?? body["input"]) as { role?: string }[];
      const lead = items[0];
      expect(["system", "developer"]).toContain(lead?.role);
      expect(JSON.stringify(lead)).toContain("You are the support agent of Acme.");
    });

    it("without a thinking level the body asks for no reasoning effort", async () => {
      endpoint.reply({ chunks: wire.answer("plain") });
      const rig = await open();
      await (await rig.harness.root(call)).prompt({ input: "hello" }, call);
      expect(wire.thinkingHigh(endpoint.requests[0]?.body ?? {})).not.toBe("high");
    });

    it("two parallel tool calls: both run, both results go back in the next request, then the answer", async () => {
      endpoint.reply({ chunks: wire.twoCalls() }, { chunks: wire.answer("both echoed") });
      const rig = await open();
      await (await rig.harness.root(call)).prompt({ input: "call echo twice" }, call);
      expect(endpoint.requests).toHaveLength(2);
      const [calls, final] = await assistants(rig);
      expect(calls?.content).toMatchObject([
        { type: "toolCall", name: "echo", arguments: { text: "ping" } },
        { type: "toolCall", name: "echo", arguments: { text: "pong" } },
      ]);
      expect(final?.content).toMatchObject([{ type: "text", text: "both echoed" }]);
      expect(wire.toolResultIds(endpoint.requests[1])).toEqual(["call_1", "call_2"]);
      const second = JSON.stringify(endpoint.requests[1]?.body);
      expect(second).toContain("ping");
      expect(second).toContain("pong");
      expect((await usageRows(rig)).map((r) => (r.usage as { input: number } | null)?.input)).toEqual([200, 120]);
    });

    it("a 429 with retry-after: 30 waits exactly 30 s on the clock, one request per attempt, then answers", async () => {
      endpoint.reply(
        jsonError(
          429,
          { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } },
          { "retry-after": "30" },
        ),
        { chunks: wire.answer("after the wait") },
      );
      const rig = await open();
      const { start, inputId, driving } = await acceptAndDrive(rig);
      await retrySleep(rig);
      expect(await generationState(rig)).toMatchObject({
        status: "retry_wait",
        notBefore: start + 30_000,
        retry: { attempt: 1 },
      });
      await expectWaitsExactly(endpoint, rig, driving, 30_000);
      expect(await resultOf(rig, inputId)).toMatchObject({ status: "done" });
    });

    it("a 500 backs off 1 s (base 1 s, no jitter), one request per attempt, then answers", async () => {
      endpoint.reply(
        jsonError(500, {
          error: { message: "The server had an error while processing your request", type: "server_error" },
        }),
        { chunks: wire.answer("recovered") },
      );
      const rig = await open();
      const { start, driving } = await acceptAndDrive(rig);
      await retrySleep(rig);
      expect(await generationState(rig)).toMatchObject({ status: "retry_wait", notBefore: start + 1000 });
      expect(endpoint.requests).toHaveLength(1);
      rig.clock.advance(1000);
      expect(await driving).toBe("idle");
      expect(endpoint.requests).toHaveLength(2);
      expect(await usageRows(rig)).toHaveLength(2);
    });

    it("a context-overflow error settles the generation failed(overflow) without a retry", async () => {
      endpoint.reply(
        jsonError(400, {
          error: {
            message: "Your input exceeds the context window of this model. Please adjust your input and try again.",
            type: "invalid_request_error",
            code: "context_length_exceeded",
          },
        }),
      );
      const rig = await open();
      await expectOverflowSettles(endpoint, rig, wire.path);
    });

    it("a stream cut mid-answer is not an answer: the attempt records usage and the generation retries", async () => {
      endpoint.reply(
        { chunks: wire.answer("never finished").slice(0, 3), cut: true },
        { chunks: wire.answer("second try") },
      );
      const rig = await open();
      const { inputId, driving } = await acceptAndDrive(rig);
      await retrySleep(rig);
      expect(await generationState(rig)).toMatchObject({ status: "retry_wait" });
      expect(await usageRows(rig)).toHaveLength(1);
      rig.clock.advance(1000);
      expect(await driving).toBe("idle");
      expect(await resultOf(rig, inputId)).toMatchObject({ status: "done" });
      expect((await assistants(rig)).map((a) => a.content.map((b) => b.text))).toEqual([["second try"]]);
    });
  });
}

describe("a keyless custom endpoint (no keySecret) on the wire", () => {
  for (const [api, path, answer] of [
    ["openai-completions", /^\/v1\/chat\/completions$/, completionsAnswer],
    ["openai-responses", /^\/v1\/responses$/, responsesAnswer],
  ] as const) {
    it(`${api}: a local endpoint without a key answers (pi-ai refuses a request with no key at all)`, async () => {
      endpoint.reply({ chunks: answer("no key needed") });
      const rig = await openWire({
        secrets: {},
        model: "local/m",
        custom: [{ id: "local", baseUrl: `${endpoint.url}/v1`, api, models: [{ id: "m" }] }],
      });
      await expectKeylessAnswer(endpoint, rig, path, ["authorization", "Bearer keyless"]);
    });
  }
});
