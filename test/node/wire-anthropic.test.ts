/**
 * Anthropic Messages on the wire (docs/models.md "Wire tests"): pi-ai's real Anthropic Messages API against a local
 * fake
 * endpoint answering in the documented SSE format, three ways: the catalogue `anthropic` provider,
 * Cloudflare AI Gateway's Anthropic route (the catalogue `cloudflare-ai-gateway` provider) and a custom
 * `anthropic-messages` endpoint declared in configuration (built with createProvider). Request
 * bodies (tools, thinking, system), entries, usage rows, retry timing on a fake clock, overflow and a
 * cut stream.
 */
import { describe, expect, it } from "vitest";
import {
  acceptAndDrive,
  expectOverflowSettles,
  expectWaitsExactly,
  assistants,
  call,
  eventually,
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
  type WireRoute,
} from "./wire-fixtures.js";

/** One way to reach the Messages API: the catalogue provider, or a custom endpoint from configuration. */
interface Wire extends WireRoute {
  /** The header that carries the key, and its value. */
  readonly auth: readonly [string, string];
}

const wires: readonly Wire[] = [
  {
    name: "Anthropic Messages (catalogue anthropic)",
    model: "anthropic/claude-sonnet-4-5",
    secrets: { ANTHROPIC_API_KEY: "sk-ant-test" },
    path: /^\/v1\/messages(\?|$)/,
    auth: ["x-api-key", "sk-ant-test"],
  },
  {
    // AI Gateway's Anthropic route: the token goes in cf-aig-authorization (never x-api-key), under
    // /v1/{account}/{gateway}/anthropic.
    name: "Anthropic Messages through Cloudflare AI Gateway (catalogue cloudflare-ai-gateway)",
    model: "cloudflare-ai-gateway/claude-haiku-4-5",
    secrets: { CLOUDFLARE_API_KEY: "cf-token-test", CLOUDFLARE_ACCOUNT_ID: "acct-1", CLOUDFLARE_GATEWAY_ID: "gw-1" },
    path: /^\/v1\/acct-1\/gw-1\/anthropic\/v1\/messages(\?|$)/,
    auth: ["cf-aig-authorization", "Bearer cf-token-test"],
  },
  {
    name: "Anthropic Messages (a custom anthropic-messages endpoint from configuration)",
    model: "company-gw/claude-compatible",
    secrets: { COMPANY_GW_KEY: "gw-key-test" },
    // The Anthropic SDK appends /v1/messages to the base URL, as it does to https://api.anthropic.com.
    custom: (endpoint) => [
      {
        id: "company-gw",
        baseUrl: endpoint.url,
        api: "anthropic-messages",
        keySecret: "COMPANY_GW_KEY",
        models: [{ id: "claude-compatible", reasoning: true, contextWindow: 200_000 }],
      },
    ],
    path: /^\/v1\/messages(\?|$)/,
    auth: ["x-api-key", "gw-key-test"],
  },
];

function messageStart(input: number) {
  return [
    "message_start",
    {
      type: "message_start",
      message: {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: input, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
      },
    },
  ] as const;
}

function textAnswer(text: string, options: { thinking?: string; input?: number; output?: number } = {}): string[] {
  const events: [string, unknown][] = [[...messageStart(options.input ?? 120)]];
  let index = 0;
  if (options.thinking !== undefined) {
    events.push([
      "content_block_start",
      { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } },
    ]);
    events.push([
      "content_block_delta",
      { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: options.thinking } },
    ]);
    events.push([
      "content_block_delta",
      { type: "content_block_delta", index, delta: { type: "signature_delta", signature: "sig-1" } },
    ]);
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
    index += 1;
  }
  events.push([
    "content_block_start",
    { type: "content_block_start", index, content_block: { type: "text", text: "" } },
  ]);
  events.push([
    "content_block_delta",
    { type: "content_block_delta", index, delta: { type: "text_delta", text: text.slice(0, 3) } },
  ]);
  events.push([
    "content_block_delta",
    { type: "content_block_delta", index, delta: { type: "text_delta", text: text.slice(3) } },
  ]);
  events.push(["content_block_stop", { type: "content_block_stop", index }]);
  events.push([
    "message_delta",
    {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: options.output ?? 42 },
    },
  ]);
  events.push(["message_stop", { type: "message_stop" }]);
  return sse(events);
}

function twoToolCalls(): string[] {
  const events: [string, unknown][] = [[...messageStart(200)]];
  ["ping", "pong"].forEach((word, index) => {
    events.push([
      "content_block_start",
      {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: `toolu_${index + 1}`, name: "echo", input: {} },
      },
    ]);
    events.push([
      "content_block_delta",
      { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: '{"text":' } },
    ]);
    events.push([
      "content_block_delta",
      { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: `"${word}"}` } },
    ]);
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
  });
  events.push([
    "message_delta",
    { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 30 } },
  ]);
  events.push(["message_stop", { type: "message_stop" }]);
  return sse(events);
}

const endpoint = useFakeEndpoint();

for (const wire of wires) {
  const openWith = (extra: { thinking?: string } = {}) => openRoute(wire, endpoint, extra);

  describe(`${wire.name} on the wire`, () => {
    it("thinking high reaches Anthropic's `thinking`; the system section and tools are in the body; thinking + text land in the answer; usage is recorded", async () => {
      endpoint.reply({ chunks: textAnswer("Hello there", { thinking: "Let me think." }) });
      const rig = await openWith({ thinking: "high" });
      const root = await rig.harness.root(call);
      await root.prompt({ input: "hello" }, call);
      expect(endpoint.requests).toHaveLength(1);
      const [request] = endpoint.requests;
      expect(request?.path).toMatch(wire.path);
      expect(request?.headers[wire.auth[0]]).toBe(wire.auth[1]);
      if (wire.auth[0] !== "x-api-key") expect(request?.headers["x-api-key"]).toBeUndefined();
      const body = request?.body ?? {};
      expect(body["thinking"]).toMatchObject({ type: expect.stringMatching(/enabled|adaptive/) });
      expect(body["stream"]).toBe(true);
      expect((body["tools"] as { name: string }[]).map((t) => t.name)).toEqual(["echo"]);
      expect(JSON.stringify(body["system"])).toContain(IDENTITY);
      expect((body["messages"] as { role: string }[]).at(-1)).toMatchObject({ role: "user" });
      const [answer] = await assistants(rig);
      expect(answer?.content.map((b) => b.type)).toEqual(["thinking", "text"]);
      expect(answer?.content[0]).toMatchObject({ thinking: "Let me think.", thinkingSignature: "sig-1" });
      expect(answer?.content[1]).toMatchObject({ text: "Hello there" });
      const rows = await usageRows(rig);
      expect(rows).toHaveLength(1);
      expect(rows[0]?.usage).toMatchObject({ input: 120, output: 42 });
    });

    it("a profile's text reaches Anthropic's `system` with the variables filled in", async () => {
      endpoint.reply({ chunks: textAnswer("Hi") });
      const rig = await openWith();
      await useProfile(rig, "You are the support agent of {{company}}.", { company: "Acme" });
      const root = await rig.harness.root(call);
      await root.prompt({ input: "hello" }, call);
      const system = JSON.stringify(endpoint.requests[0]?.body["system"]);
      expect(system).toContain("You are the support agent of Acme.");
      expect(system).toContain(IDENTITY);
    });

    it("without a thinking level the body asks for no thinking", async () => {
      endpoint.reply({ chunks: textAnswer("plain") });
      const rig = await openWith();
      await (await rig.harness.root(call)).prompt({ input: "hello" }, call);
      expect((endpoint.requests[0]?.body["thinking"] as { type?: string } | undefined)?.type ?? "disabled").toBe(
        "disabled",
      );
    });

    it("two parallel tool calls: both run, both results go back in the next request, then the answer", async () => {
      endpoint.reply({ chunks: twoToolCalls() }, { chunks: textAnswer("both echoed") });
      const rig = await openWith();
      await (await rig.harness.root(call)).prompt({ input: "call echo twice" }, call);
      expect(endpoint.requests).toHaveLength(2);
      const [calls, final] = await assistants(rig);
      expect(calls?.content).toMatchObject([
        { type: "toolCall", id: "toolu_1", name: "echo", arguments: { text: "ping" } },
        { type: "toolCall", id: "toolu_2", name: "echo", arguments: { text: "pong" } },
      ]);
      expect(final?.content).toMatchObject([{ type: "text", text: "both echoed" }]);
      const second = JSON.stringify(endpoint.requests[1]?.body["messages"]);
      expect(second).toContain('"tool_use_id":"toolu_1"');
      expect(second).toContain('"tool_use_id":"toolu_2"');
      expect(second).toContain("ping");
      expect(second).toContain("pong");
      expect((await usageRows(rig)).map((r) => (r.usage as { input: number } | null)?.input)).toEqual([200, 120]);
    });

    it("a 429 with retry-after: 30 waits exactly 30 s on the clock (durable notBefore), one request per attempt, then answers", async () => {
      endpoint.reply(
        jsonError(
          429,
          { type: "error", error: { type: "rate_limit_error", message: "Rate limited, please slow down" } },
          { "retry-after": "30" },
        ),
        { chunks: textAnswer("after the wait") },
      );
      const rig = await openWith();
      const { start, inputId, driving } = await acceptAndDrive(rig);
      await eventually(async () => (await generationState(rig))?.status === "retry_wait", "retry_wait");
      expect(await generationState(rig)).toMatchObject({
        status: "retry_wait",
        notBefore: start + 30_000,
        retry: { attempt: 1 },
      });
      await retrySleep(rig, "the sleep");
      await expectWaitsExactly(endpoint, rig, driving, 30_000);
      expect(await resultOf(rig, inputId)).toMatchObject({ status: "done" });
      expect(await usageRows(rig)).toHaveLength(2);
    });

    it("a 500 backs off exponentially (base 1 s, no jitter: 1 s then 2 s), one request per attempt", async () => {
      const overloaded = jsonError(500, {
        type: "error",
        error: { type: "api_error", message: "Internal server error" },
      });
      endpoint.reply(overloaded, overloaded, { chunks: textAnswer("third time") });
      const rig = await openWith();
      const { start, driving } = await acceptAndDrive(rig);
      await retrySleep(rig, "the first sleep");
      expect(await generationState(rig)).toMatchObject({ status: "retry_wait", notBefore: start + 1000 });
      expect(endpoint.requests).toHaveLength(1);
      rig.clock.advance(1000);
      await eventually(async () => endpoint.requests.length === 2 && rig.clock.pending > 0, "the second sleep");
      expect(await generationState(rig)).toMatchObject({
        status: "retry_wait",
        notBefore: start + 1000 + 2000,
        retry: { attempt: 2 },
      });
      rig.clock.advance(2000);
      expect(await driving).toBe("idle");
      expect(endpoint.requests).toHaveLength(3);
      expect((await assistants(rig)).at(-1)?.content).toMatchObject([{ type: "text", text: "third time" }]);
    });

    it("a context-overflow error settles the generation failed(overflow) without a retry", async () => {
      endpoint.reply(
        jsonError(400, {
          type: "error",
          error: { type: "invalid_request_error", message: "prompt is too long: 213462 tokens > 200000 maximum" },
        }),
      );
      const rig = await openWith();
      await expectOverflowSettles(endpoint, rig, wire.path);
      expect(await usageRows(rig)).toHaveLength(1);
    });

    it("a stream cut mid-answer is not an answer: the attempt records usage and the generation retries", async () => {
      const chunks = textAnswer("never finished");
      endpoint.reply({ chunks: chunks.slice(0, 4), cut: true }, { chunks: textAnswer("second try") });
      const rig = await openWith();
      const { start, inputId, driving } = await acceptAndDrive(rig);
      await retrySleep(rig);
      expect(await generationState(rig)).toMatchObject({ status: "retry_wait", notBefore: start + 1000 });
      expect(await usageRows(rig)).toHaveLength(1);
      rig.clock.advance(1000);
      expect(await driving).toBe("idle");
      expect(await resultOf(rig, inputId)).toMatchObject({ status: "done" });
      expect((await assistants(rig)).map((a) => a.content.map((b) => b.text))).toEqual([["second try"]]);
    });
  });
}

describe("a keyless custom anthropic-messages endpoint (no keySecret) on the wire", () => {
  it("a local endpoint without a key answers (pi-ai refuses a request with no key at all)", async () => {
    endpoint.reply({ chunks: textAnswer("no key needed") });
    const rig = await openWire({
      secrets: {},
      model: "local/m",
      custom: [{ id: "local", baseUrl: endpoint.url, api: "anthropic-messages", models: [{ id: "m" }] }],
    });
    await expectKeylessAnswer(endpoint, rig, /^\/v1\/messages(\?|$)/, ["x-api-key", "keyless"]);
  });
});

describe("the retry policy's knobs on the wire (the MODEL_RETRY_* vars set them in a deployment)", () => {
  it("retryHonourHints false: a 429's retry-after: 30 is ignored and the wait is the backoff (base 1 s)", async () => {
    endpoint.reply(
      jsonError(
        429,
        { type: "error", error: { type: "rate_limit_error", message: "Rate limited" } },
        { "retry-after": "30" },
      ),
      { chunks: textAnswer("after the backoff") },
    );
    const rig = await openWire({
      secrets: { ANTHROPIC_API_KEY: "sk-ant-test" },
      model: "anthropic/claude-sonnet-4-5",
      turn: { retryHonourHints: false },
    });
    const { start, inputId, driving } = await acceptAndDrive(rig);
    await retrySleep(rig);
    expect(await generationState(rig)).toMatchObject({ status: "retry_wait", notBefore: start + 1000 });
    rig.clock.advance(1000);
    expect(await driving).toBe("idle");
    expect(endpoint.requests).toHaveLength(2);
    expect(await resultOf(rig, inputId)).toMatchObject({ status: "done" });
  });

  it("maxAttempts 2 and a retryMaxDelayMs cap: the second 500 fails the input after one capped wait, two requests in all", async () => {
    const failing = jsonError(500, { type: "error", error: { type: "api_error", message: "Internal server error" } });
    endpoint.reply(failing, failing);
    const rig = await openWire({
      secrets: { ANTHROPIC_API_KEY: "sk-ant-test" },
      model: "anthropic/claude-sonnet-4-5",
      turn: { maxAttempts: 2, retryBaseMs: 5000, retryMaxDelayMs: 3000 },
    });
    const { start, inputId, driving } = await acceptAndDrive(rig);
    await retrySleep(rig);
    expect(await generationState(rig)).toMatchObject({ status: "retry_wait", notBefore: start + 3000 });
    rig.clock.advance(3000);
    expect(await driving).toBe("idle");
    expect(endpoint.requests).toHaveLength(2);
    expect(await generationState(rig)).toMatchObject({ status: "failed" });
    expect(await resultOf(rig, inputId)).toMatchObject({ status: "unanswered" });
  });
});
