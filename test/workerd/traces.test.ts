/**
 * Traces (§6.5, docs/operations.md "Stats and traces"): a turn's spans follow the OpenTelemetry GenAI
 * semantic conventions (src/core/telemetry-genai.ts), collected here with an in-memory exporter installed
 * through the host seam during a real turn on the echo model; and the OTLP/HTTP JSON exporter's request,
 * sent to a fetch stub standing in for a collector.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { GENAI_SCHEMA_URL } from "../../src/core/telemetry-genai.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { otlpConfig, type OtlpTracesRequest } from "../../src/worker/platform/otlp.js";
import { sessionTracer } from "../../src/worker/platform/session-tracer.js";
import { InMemorySpanExporter, RecordingTracer, type FinishedSpan } from "../../src/worker/platform/span-recorder.js";
import { call, client, json, token, uniqueSession, until } from "./http-fixtures.js";
import { resetSeams } from "./session-fixtures.js";
import { httpDefinition, ProductEndpoint } from "./tool-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

function one(spans: readonly FinishedSpan[], name: string): FinishedSpan {
  const found = spans.filter((s) => s.name === name);
  expect(
    found.map((s) => s.name),
    `one span named ${name}`,
  ).toEqual([name]);
  return found[0]!;
}

describe("§6.5 traces", () => {
  it("A turn's spans follow the GenAI conventions", async () => {
    const exporter = new InMemorySpanExporter();
    setHostSeams({ spanExporter: () => exporter });
    const api = await client("traces");
    const session = api.session(uniqueSession("genai"));
    await session.create({ selectedTools: ["echo"] });
    const answer = await session.conversation("root").accept('/call echo {"text":"ping"}', { wait: 10 });
    expect(answer.status).toBe("done");

    // The turn's root span is exported when it ends, with every span under it.
    const spans = await until(
      () => Promise.resolve(exporter.spans.some((s) => s.name === "invoke_agent") ? exporter.spans : undefined),
      "an exported invoke_agent span",
    );
    const agent = one(spans, "invoke_agent");
    expect(agent.parentSpanId).toBeUndefined();
    expect(agent.status).toEqual({ code: "ok" });
    expect(agent.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "pico" });
    // The conversation id carries the session's incarnation, so a re-created session never repeats one.
    expect(agent.attributes["gen_ai.conversation.id"]).toMatch(/^.+:\d+$/);

    // Two model calls (the tool call, then the answer), one tool call, one post_tools join, all in one trace.
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([agent.traceId]));
    const tasks = spans.filter((s) => s.name === "pico.task.execute");
    expect(tasks.map((s) => s.attributes["pico.task.kind"]).sort()).toEqual([
      "generation",
      "generation",
      "post_tools",
      "tool",
    ]);
    for (const task of tasks) expect(task.parentSpanId).toBe(agent.spanId);

    const chats = spans.filter((s) => s.name === "chat echo");
    expect(chats).toHaveLength(2);
    const generations = tasks.filter((s) => s.attributes["pico.task.kind"] === "generation");
    for (const chat of chats) {
      expect(generations.map((g) => g.spanId)).toContain(chat.parentSpanId);
      expect(chat.status).toEqual({ code: "ok" });
      expect(chat.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "echo",
        "gen_ai.request.model": "echo",
        "gen_ai.response.model": "echo",
      });
      expect(chat.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
      expect(chat.attributes["gen_ai.usage.output_tokens"]).toEqual(expect.any(Number));
    }
    const reasons = [...chats]
      .sort((a, b) => a.startTimeMs - b.startTimeMs)
      .map((c) => c.attributes["gen_ai.response.finish_reasons"]);
    expect(reasons).toEqual([["tool_calls"], ["stop"]]);
    // Each chat span ended before its generation's invocation span did.
    for (const chat of chats) {
      const parent = generations.find((g) => g.spanId === chat.parentSpanId)!;
      expect(spans.indexOf(chat)).toBeLessThan(spans.indexOf(parent));
    }

    const tool = one(spans, "execute_tool echo");
    const toolTask = tasks.find((s) => s.attributes["pico.task.kind"] === "tool")!;
    expect(tool.parentSpanId).toBe(toolTask.spanId);
    expect(tool.status).toEqual({ code: "ok" });
    expect(tool.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "echo",
      "gen_ai.tool.type": "function",
    });
    expect(tool.attributes["gen_ai.tool.call.id"]).toEqual(expect.any(String));

    // The root ends last: its children all ended inside it.
    expect(spans.indexOf(agent)).toBe(spans.length - 1);
    for (const span of spans) {
      expect(span.endTimeMs).toBeGreaterThanOrEqual(span.startTimeMs);
      expect(span.startTimeMs).toBeGreaterThanOrEqual(agent.startTimeMs);
    }
  });

  it("an approval wait is a span of its own under the tool call's invocation", async () => {
    const exporter = new InMemorySpanExporter();
    const tenant = `traces-approval-${Date.now().toString(36)}`;
    const endpoint = new ProductEndpoint(tenant).reply("gate", () => ({ status: 200, body: { output: "opened" } }));
    setHostSeams({ spanExporter: () => exporter, fetch: endpoint.fetch });
    const operator = await token(tenant, "operator");
    const defined = await call("PUT", "/v1/tools/gate", {
      token: operator,
      body: { ...httpDefinition("gate"), approval: "always" },
    });
    expect([200, 201], await defined.clone().text()).toContain(defined.status);
    const user = await token(tenant, "client");
    const name = uniqueSession("approval");
    const created = await call("PUT", `/v1/sessions/${name}`, {
      token: user,
      body: { model: "echo", selectedTools: ["gate"] },
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const accepted = await call("POST", `/v1/sessions/${name}/conversations/root/inputs`, {
      token: user,
      body: { input: '/call gate {"id":1}' },
    });
    expect(accepted.status, await accepted.clone().text()).toBe(201);
    const item = await until(async () => {
      const response = await call("GET", `/v1/sessions/${name}/pending`, { token: user });
      return (await json<{ items: { id: string }[] }>(response)).items[0];
    }, "the approval");
    // Nothing is exported while the turn waits: its root has not ended.
    expect(exporter.spans.filter((s) => s.name === "invoke_agent")).toEqual([]);
    const answered = await call("POST", `/v1/sessions/${name}/pending/${item.id}`, {
      token: user,
      body: { approve: true },
    });
    expect(answered.status, await answered.clone().text()).toBe(200);

    const spans = await until(
      () =>
        Promise.resolve(
          exporter.spans.some((s) => s.name === "invoke_agent") &&
            exporter.spans.some((s) => s.name === "pico.pending approval")
            ? exporter.spans
            : undefined,
        ),
      "the exported approval wait and turn",
    );
    const wait = one(spans, "pico.pending approval");
    expect(wait.attributes).toMatchObject({
      "pico.pending.type": "approval",
      "pico.pending.id": item.id,
      "pico.pending.outcome": "answered",
      "gen_ai.tool.name": "gate",
    });
    expect(wait.status).toEqual({ code: "ok" });
    const toolTask = spans.find((s) => s.spanId === wait.parentSpanId);
    expect(toolTask).toMatchObject({ name: "pico.task.execute", attributes: { "pico.task.kind": "tool" } });
    const agent = one(spans, "invoke_agent");
    expect(toolTask!.parentSpanId).toBe(agent.spanId);
  });

  it("a subagent's spans nest under the parent turn's span that started it, in one trace", async () => {
    const exporter = new InMemorySpanExporter();
    setHostSeams({ spanExporter: () => exporter });
    const api = await client("traces");
    const session = api.session(uniqueSession("subagent"));
    await session.create({ selectedTools: ["subagent"] });
    const prompt = JSON.stringify({ command: "run", prompt: "hello from the child" });
    const answer = await session.conversation("root").accept(`/call subagent ${prompt}`, { wait: 30 });
    expect(answer.status).toBe("done");

    // The parent's turn is the only root: the child's turn is exported with it, when it ends.
    const spans = await until(
      () =>
        Promise.resolve(
          exporter.spans.filter((s) => s.name === "invoke_agent").length === 2 ? exporter.spans : undefined,
        ),
      "both exported invoke_agent spans",
    );
    const agents = spans.filter((s) => s.name === "invoke_agent");
    const parent = agents.find((s) => s.parentSpanId === undefined);
    const child = agents.find((s) => s.parentSpanId !== undefined);
    expect(parent, "the parent's turn is a root span").toBeDefined();
    expect(child, "the child's turn has a parent span").toBeDefined();
    expect(child!.attributes["pico.conversation"]).not.toBe(parent!.attributes["pico.conversation"]);

    // One trace; the child's turn hangs under the invocation of the tool task that ran `subagent`.
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([parent!.traceId]));
    const spawning = spans.find((s) => s.spanId === child!.parentSpanId);
    expect(spawning).toMatchObject({
      name: "pico.task.execute",
      attributes: { "pico.task.kind": "tool", "pico.conversation": parent!.attributes["pico.conversation"] },
    });
    expect(spawning!.parentSpanId).toBe(parent!.spanId);
    const executeTool = one(spans, "execute_tool subagent");
    expect(executeTool.parentSpanId).toBe(spawning!.spanId);

    // The child's own invocations and model call are under its turn.
    const childTasks = spans.filter(
      (s) =>
        s.name === "pico.task.execute" && s.attributes["pico.conversation"] === child!.attributes["pico.conversation"],
    );
    expect(childTasks.map((s) => s.attributes["pico.task.kind"])).toContain("generation");
    for (const task of childTasks) expect(task.parentSpanId).toBe(child!.spanId);
    const childChats = spans.filter(
      (s) => s.name === "chat echo" && childTasks.some((t) => t.spanId === s.parentSpanId),
    );
    expect(childChats.length).toBeGreaterThan(0);
    // The root ends last.
    expect(spans.indexOf(parent!)).toBe(spans.length - 1);
  });

  it("a span that ends after its parent is sent when it ends, not held for a root that already left", async () => {
    const exporter = new InMemorySpanExporter();
    const scheduled: Promise<void>[] = [];
    const tracer = new RecordingTracer({ exporter, schedule: (p) => scheduled.push(p), failed: () => undefined });
    const root = tracer.startSpan("root", {});
    const spawn = tracer.startSpan("spawn", {}, root);
    const late = tracer.startSpan("late turn", {}, spawn);
    spawn.end();
    root.end();
    await Promise.all(scheduled);
    expect(exporter.spans.map((s) => s.name)).toEqual(["spawn", "root"]);
    late.end();
    await Promise.all(scheduled);
    expect(exporter.spans.map((s) => s.name)).toEqual(["spawn", "root", "late turn"]);
    expect(exporter.spans[2]).toMatchObject({
      traceId: exporter.spans[1]!.traceId,
      parentSpanId: exporter.spans[0]!.spanId,
    });
  });

  it("the OTLP exporter POSTs the spans as OTLP/HTTP JSON to the configured endpoint, in waitUntil", async () => {
    const requests: Request[] = [];
    setHostSeams({
      fetch: (request) => {
        requests.push(request);
        return Promise.resolve(new Response("{}", { status: 200 }));
      },
    });
    const waited: Promise<void>[] = [];
    const tracer = sessionTracer(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.test/otlp/",
        OTEL_EXPORTER_OTLP_HEADERS: "x-honeycomb-team=key%201, X-Dataset = pico",
        OTEL_SERVICE_NAME: "pico-test",
      },
      (exported) => waited.push(exported),
    );
    const root = tracer.startSpan("invoke_agent", { "gen_ai.operation.name": "invoke_agent" });
    const chat = tracer.startSpan("chat echo", { "gen_ai.usage.input_tokens": 3 }, root);
    chat.setAttribute("gen_ai.response.finish_reasons", ["stop"]);
    chat.setAttribute("pico.ratio", 0.5);
    chat.recordError(new TypeError("boom"));
    chat.setStatus("error", "boom");
    chat.end();
    // Nothing leaves before the root ends.
    expect(waited).toHaveLength(0);
    root.setStatus("ok");
    root.end();
    root.end();
    expect(waited).toHaveLength(1);
    await Promise.all(waited);

    expect(requests).toHaveLength(1);
    const request = requests[0]!;
    expect(request.method).toBe("POST");
    expect(request.url).toBe("https://collector.test/otlp/v1/traces");
    expect(request.headers.get("content-type")).toBe("application/json");
    expect(request.headers.get("x-honeycomb-team")).toBe("key 1");
    expect(request.headers.get("x-dataset")).toBe("pico");
    const body = await request.json<OtlpTracesRequest>();
    expect(body.resourceSpans).toHaveLength(1);
    const resource = body.resourceSpans[0]!;
    expect(resource.resource.attributes).toEqual([{ key: "service.name", value: { stringValue: "pico-test" } }]);
    expect(resource.scopeSpans).toHaveLength(1);
    const scope = resource.scopeSpans[0]!;
    expect(scope.scope).toEqual({ name: "pico-edge" });
    expect(scope.schemaUrl).toBe(GENAI_SCHEMA_URL);
    const [child, parent] = scope.spans;
    expect(scope.spans).toHaveLength(2);
    expect(parent).toMatchObject({ name: "invoke_agent", kind: 1, status: { code: 1 } });
    expect(parent!.parentSpanId).toBeUndefined();
    expect(parent!.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(parent!.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(parent!.startTimeUnixNano).toMatch(/^\d+000000$/);
    expect(child).toMatchObject({
      name: "chat echo",
      traceId: parent!.traceId,
      parentSpanId: parent!.spanId,
      status: { code: 2, message: "boom" },
      attributes: [
        { key: "gen_ai.usage.input_tokens", value: { intValue: "3" } },
        { key: "gen_ai.response.finish_reasons", value: { arrayValue: { values: [{ stringValue: "stop" }] } } },
        { key: "pico.ratio", value: { doubleValue: 0.5 } },
      ],
      events: [
        {
          name: "exception",
          attributes: [
            { key: "exception.type", value: { stringValue: "TypeError" } },
            { key: "exception.message", value: { stringValue: "boom" } },
          ],
        },
      ],
    });
    expect(child!.spanId).not.toBe(parent!.spanId);
  });

  it("a failed OTLP export is reported and drops its batch; the next batch is sent", async () => {
    const reports: string[] = [];
    let status = 503;
    const sent: Request[] = [];
    setHostSeams({
      fetch: (request) => {
        sent.push(request);
        return Promise.resolve(new Response(null, { status }));
      },
      report: (report) => reports.push(report.type),
    });
    const waited: Promise<void>[] = [];
    const tracer = sessionTracer({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://localhost:4318/v1/traces" }, (p) =>
      waited.push(p),
    );
    tracer.startSpan("invoke_agent", {}).end();
    await Promise.all(waited);
    expect(reports).toEqual(["trace_export_failed"]);
    status = 200;
    tracer.startSpan("invoke_agent", { second: true }).end();
    await Promise.all(waited);
    expect(sent.map((r) => r.url)).toEqual(["http://localhost:4318/v1/traces", "http://localhost:4318/v1/traces"]);
    const second = await sent[1]!.json<OtlpTracesRequest>();
    expect(second.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.attributes)).toEqual([
      [{ key: "second", value: { boolValue: true } }],
    ]);
    expect(reports).toEqual(["trace_export_failed"]);
  });

  it("bad OTLP variables are misconfigured problems naming the variable; none set means no exporter", () => {
    expect(otlpConfig({})).toBeUndefined();
    expect(otlpConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " })).toBeUndefined();
    expect(() => otlpConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(
      /misconfigured: OTEL_EXPORTER_OTLP_ENDPOINT is invalid/,
    );
    expect(() => otlpConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://collector/v1/traces" })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is invalid: expected an http\(s\) URL/,
    );
    expect(() =>
      otlpConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.test", OTEL_EXPORTER_OTLP_HEADERS: "novalue" }),
    ).toThrow(/OTEL_EXPORTER_OTLP_HEADERS is invalid: pair 1/);
    expect(() =>
      otlpConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.test", OTEL_EXPORTER_OTLP_HEADERS: "a=%zz" }),
    ).toThrow(/OTEL_EXPORTER_OTLP_HEADERS is invalid: the value of a/);
    // The full traces URL wins over the base.
    expect(
      otlpConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "https://base.test",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.test/custom",
      }),
    ).toEqual({ url: "https://traces.test/custom", headers: {}, serviceName: "pico-edge" });
  });
});
