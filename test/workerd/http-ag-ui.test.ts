/**
 * AG-UI 1.0 over HTTP + SSE (docs/api.md "AG-UI"): `POST /v1/sessions/{s}/ag-ui` driven by the real
 * `@ag-ui/client` HttpAgent, whose fetch goes to the Worker (SELF). Every event on the wire is validated with
 * `@ag-ui/core`'s schemas; a run sent again is the same input; an approval ends the run with an `interrupt`
 * outcome that `resume[]` answers, and a client tool ends it with `pendingToolCallIds`, answered by a tool message.
 */
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import type { BaseEvent, Message } from "@ag-ui/core";
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/storage/records.js";
import { BASE, call, json, token, uniqueSession, workerFetch } from "./http-fixtures.js";
import { installSeams, resetSeams } from "./session-fixtures.js";
import { fromTemplate, putUserTemplate } from "./users-fixtures.js";

let tenants = 0;
let TENANT = "ag-ui";

beforeEach(() => {
  installSeams();
  tenants += 1;
  TENANT = `ag-ui-${tenants}-${Date.now().toString(36)}`;
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

async function defineTool(name: string, definition: JsonObject): Promise<void> {
  const body = {
    description: `${name} (test)`,
    parameters: { type: "object", properties: { id: { type: "integer" } } },
    ...definition,
  };
  const response = await call("PUT", `/v1/tools/${name}`, { token: await token(TENANT, "operator"), body });
  expect(response.status, await response.clone().text()).toBe(201);
}

async function newSession(selectedTools?: string[]): Promise<{ name: string; t: string }> {
  const name = uniqueSession("ag-ui");
  const t = await token(TENANT, "client");
  const created = await call("PUT", `/v1/sessions/${name}`, {
    token: t,
    body: selectedTools === undefined ? {} : { selectedTools },
  });
  expect(created.status, await created.clone().text()).toBe(201);
  return { name, t };
}

/** Every `data:` payload of an SSE body, parsed. */
function dataOf(text: string): unknown[] {
  return text
    .split(/\n\n/)
    .flatMap((block) => block.split("\n").filter((line) => line.startsWith("data:")))
    .map((line) => JSON.parse(line.slice(5).trim()) as unknown);
}

/** An HttpAgent on the session's AG-UI route; `wire` collects every event the server sent, as sent. */
function agentOf(name: string, t: string, threadId = "root", initialMessages: Message[] = []) {
  const wire: unknown[][] = [];
  const agent = new HttpAgent({
    url: `${BASE}/v1/sessions/${name}/ag-ui`,
    headers: { authorization: `Bearer ${t}` },
    threadId,
    initialMessages,
    fetch: async (url, init) => {
      const response = await workerFetch(new Request(url, init));
      const run: unknown[] = [];
      wire.push(run);
      if (response.body === null) return response;
      // Record the bytes as they pass (a clone's tee would hold the agent's copy back until the end).
      const decoder = new TextDecoder();
      let text = "";
      const recorder = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          text += decoder.decode(chunk, { stream: true });
          controller.enqueue(chunk);
        },
        flush() {
          run.push(...dataOf(text));
        },
      });
      return new Response(response.body.pipeThrough(recorder), response);
    },
  });
  return { agent, wire };
}

/** Run once; the events the agent saw, and the run's wire events once the body has been read. */
async function runOnce(
  agent: HttpAgent,
  wire: unknown[][],
  parameters: Parameters<HttpAgent["runAgent"]>[0] = {},
): Promise<{ events: BaseEvent[]; sent: unknown[] }> {
  const events: BaseEvent[] = [];
  await agent.runAgent(parameters, { onEvent: ({ event }) => void events.push(event) });
  await new Promise((resolve) => setTimeout(resolve, 20));
  const sent = wire[wire.length - 1] ?? [];
  return { events, sent };
}

function validateAll(sent: readonly unknown[]): void {
  expect(sent.length).toBeGreaterThan(1);
  for (const event of sent) {
    const parsed = EventSchemas.safeParse(event);
    expect(parsed.success, `${JSON.stringify(event)}: ${parsed.error?.message ?? ""}`).toBe(true);
  }
}

type Wire = { type: string } & Record<string, unknown>;

function typesOf(sent: readonly unknown[]): string[] {
  return sent.map((event) => (event as Wire).type);
}

function finished(sent: readonly unknown[]): Wire {
  const last = sent[sent.length - 1] as Wire;
  expect(last.type).toBe("RUN_FINISHED");
  return last;
}

function textOf(sent: readonly unknown[]): string {
  return sent
    .filter((event) => (event as Wire).type === "TEXT_MESSAGE_CONTENT")
    .map((event) => String((event as Wire)["delta"]))
    .join("");
}

async function userEntries(name: string, t: string): Promise<number> {
  const entries = await json<{ items: { kind: string }[] }>(
    await call("GET", `/v1/sessions/${name}/conversations/root/entries`, { token: t }),
  );
  return entries.items.filter((entry) => entry.kind === "user").length;
}

/** What a page loading its thread sees: the MESSAGES_SNAPSHOT of a run without messages. */
async function loadThread(name: string, t: string, threadId: string): Promise<{ id: string; content?: string }[]> {
  const response = await call("POST", `/v1/sessions/${name}/ag-ui`, {
    token: t,
    body: { threadId, runId: crypto.randomUUID(), messages: [] },
  });
  expect(response.status, await response.clone().text()).toBe(200);
  const snapshot = dataOf(await response.text()).find((event) => (event as Wire).type === "MESSAGES_SNAPSHOT");
  return (snapshot as { messages: { id: string; content?: string }[] }).messages;
}

/** The texts of a conversation's user entries. */
async function userTexts(name: string, t: string, conversation: string): Promise<string[]> {
  const entries = await json<{ items: { model: { content: string | { text?: string }[] }[] }[] }>(
    await call("GET", `/v1/sessions/${name}/conversations/${conversation}/entries?kind=user`, { token: t }),
  );
  return entries.items.map((entry) =>
    entry.model
      .map((m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text ?? "").join("")))
      .join(""),
  );
}

describe("AG-UI over HTTP + SSE", () => {
  it("Every AG-UI event validates against @ag-ui/core", async () => {
    const { name, t } = await newSession();
    const { agent, wire } = agentOf(name, t);
    agent.addMessage({ id: "u-1", role: "user", content: "hello from a page" });
    const first = await runOnce(agent, wire);
    validateAll(first.sent);
    expect(typesOf(first.sent)).toEqual([
      "RUN_STARTED",
      "TEXT_MESSAGE_START",
      ...typesOf(first.sent).filter((type) => type === "TEXT_MESSAGE_CONTENT"),
      "TEXT_MESSAGE_END",
      "RUN_FINISHED",
    ]);
    expect(textOf(first.sent)).toBe("hello from a page");
    expect(finished(first.sent)["outcome"]).toEqual({ type: "success" });
    // The agent folded the events into an assistant message.
    expect(agent.messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "hello from a page"],
      ["assistant", "hello from a page"],
    ]);

    // The same run sent again (the page lost the answer): the same input, its answer once, no second turn.
    const again = agentOf(name, t, "root", [{ id: "u-1", role: "user", content: "hello from a page" }]);
    const resent = await runOnce(again.agent, again.wire);
    validateAll(resent.sent);
    expect(textOf(resent.sent)).toBe("hello from a page");
    expect(await userEntries(name, t)).toBe(1);
    // With the answer held, nothing is sent again.
    const held = await runOnce(agent, wire);
    expect(typesOf(held.sent)).toEqual(["RUN_STARTED", "RUN_FINISHED"]);
    expect(await userEntries(name, t)).toBe(1);

    // A new user message is a new input, on the same thread.
    agent.addMessage({ id: "u-2", role: "user", content: "and again" });
    const next = await runOnce(agent, wire);
    validateAll(next.sent);
    expect(textOf(next.sent)).toBe("and again");
    expect(await userEntries(name, t)).toBe(2);
  });

  it("An AG-UI run that waits on approval finishes with outcome interrupt and resumes with resume[]", async () => {
    await defineTool("deploy", { handler: { type: "client", timeoutMs: 86_400_000 }, approval: "always" });
    const { name, t } = await newSession(["deploy"]);
    const { agent, wire } = agentOf(name, t);
    agent.addMessage({ id: "u-deploy", role: "user", content: '/call deploy {"id":7}' });

    // 1. The model calls deploy; its approval waits: the run ends with an interrupt naming the pending item.
    const first = await runOnce(agent, wire);
    validateAll(first.sent);
    const start = first.sent.find((event) => (event as Wire).type === "TOOL_CALL_START") as Wire;
    expect(start).toMatchObject({ toolCallName: "deploy" });
    const args = first.sent
      .filter((event) => (event as Wire).type === "TOOL_CALL_ARGS")
      .map((event) => String((event as Wire)["delta"]))
      .join("");
    expect(JSON.parse(args)).toEqual({ id: 7 });
    const outcome = finished(first.sent)["outcome"] as {
      type: string;
      interrupts: { id: string; toolCallId: string }[];
    };
    expect(outcome.type).toBe("interrupt");
    const pending = await json<{ items: { id: string; type: string }[] }>(
      await call("GET", `/v1/sessions/${name}/pending`, { token: t }),
    );
    expect(pending.items).toEqual([expect.objectContaining({ type: "approval" })]);
    expect(outcome.interrupts).toEqual([
      expect.objectContaining({ id: pending.items[0]?.id, toolCallId: start["toolCallId"] }),
    ]);

    // The client refuses to run on without answering the interrupt.
    await expect(agent.runAgent()).rejects.toThrow(/pending interrupt/);

    // 2. resume[] approves: the call runs, and, a client tool, waits for the page's output.
    const second = await runOnce(agent, wire, {
      resume: [{ interruptId: outcome.interrupts[0]?.id ?? "", status: "resolved", payload: { approve: true } }],
    });
    validateAll(second.sent);
    expect(finished(second.sent)["outcome"]).toEqual({
      type: "success",
      pendingToolCallIds: [start["toolCallId"]],
    });
    // Already held by the page: the tool call is not sent again.
    expect(typesOf(second.sent)).toEqual(["RUN_STARTED", "RUN_FINISHED"]);

    // A second answer to the same approval is refused with the first (the durable pending list decides).
    const twice = await call("POST", `/v1/sessions/${name}/ag-ui`, {
      token: t,
      body: {
        threadId: "root",
        runId: "again",
        messages: [{ id: "u-deploy", role: "user", content: '/call deploy {"id":7}' }],
        tools: [],
        context: [],
        resume: [{ interruptId: outcome.interrupts[0]?.id, status: "resolved", payload: { approve: false } }],
      },
    });
    expect(twice.status).toBe(409);
    expect(await json(twice)).toMatchObject({ code: "already_answered", answer: { approve: true } });

    // 3. A tool message answers the client tool; the turn ends with the model's answer.
    agent.addMessage({
      id: "tool-1",
      role: "tool",
      toolCallId: String(start["toolCallId"]),
      content: "deployed 7",
    });
    const third = await runOnce(agent, wire);
    validateAll(third.sent);
    expect(textOf(third.sent)).toBe("deployed 7");
    expect(finished(third.sent)["outcome"]).toEqual({ type: "success" });
    expect(await userEntries(name, t)).toBe(1);
  });

  it("streams a live turn's committed tokens as they come, and ends cancelled after an abort", async () => {
    const name = uniqueSession("ag-ui-slow");
    const t = await token(TENANT, "client");
    expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: { model: "echo-slow" } })).status).toBe(201);
    const { agent, wire } = agentOf(name, t);
    const words = "one two three four five six seven eight";
    agent.addMessage({ id: "u-slow", role: "user", content: words });
    const live = await runOnce(agent, wire);
    validateAll(live.sent);
    // Several deltas, each a piece of the answer as it was committed, together the whole answer once.
    expect(typesOf(live.sent).filter((type) => type === "TEXT_MESSAGE_CONTENT").length).toBeGreaterThan(1);
    expect(textOf(live.sent)).toBe(words);

    // A long answer aborted from the abort route once its first token arrived: the run ends cancelled, its text
    // a prefix of the answer.
    const long = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ");
    agent.addMessage({ id: "u-long", role: "user", content: long });
    let aborted: Promise<Response> | undefined;
    const events: BaseEvent[] = [];
    await agent.runAgent(
      {},
      {
        onEvent: ({ event }) => void events.push(event),
        onTextMessageContentEvent: () => {
          aborted ??= call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: t });
        },
      },
    );
    expect((await aborted)?.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const sent = wire[wire.length - 1] ?? [];
    validateAll(sent);
    expect(finished(sent)["outcome"]).toEqual({ type: "cancelled" });
    expect(long.startsWith(textOf(sent))).toBe(true);
    expect(textOf(sent).length).toBeLessThan(long.length);
  });

  it("A page tool is offered to the model for its run only, and the page's tool message answers it", async () => {
    const { name, t } = await newSession();
    const { agent, wire } = agentOf(name, t);
    const pickColor = {
      name: "pick_color",
      description: "Ask the person at the page to pick a colour",
      parameters: { type: "object", properties: { hint: { type: "string" } }, required: ["hint"] },
    };
    agent.addMessage({ id: "u-pick", role: "user", content: '/call pick_color {"hint":"warm"}' });

    // 1. The model calls the page's tool: the run ends waiting for the page, naming the call.
    const first = await runOnce(agent, wire, { tools: [pickColor] });
    validateAll(first.sent);
    const start = first.sent.find((event) => (event as Wire).type === "TOOL_CALL_START") as Wire;
    expect(start).toMatchObject({ toolCallName: "pick_color" });
    expect(finished(first.sent)["outcome"]).toEqual({ type: "success", pendingToolCallIds: [start["toolCallId"]] });
    const pending = await json<{ items: { type: string; name: string }[] }>(
      await call("GET", `/v1/sessions/${name}/pending`, { token: t }),
    );
    expect(pending.items).toEqual([expect.objectContaining({ type: "client_tool", name: "pick_color" })]);

    // 2. The page's tool message answers it; the model answers with the result.
    agent.addMessage({ id: "tool-pick", role: "tool", toolCallId: String(start["toolCallId"]), content: "amber" });
    const second = await runOnce(agent, wire, { tools: [pickColor] });
    validateAll(second.sent);
    expect(textOf(second.sent)).toBe("amber");
    expect(finished(second.sent)["outcome"]).toEqual({ type: "success" });

    // 3. A later run that does not offer it: the model's call of it is refused as not offered, and nothing waits.
    agent.addMessage({ id: "u-again", role: "user", content: '/call pick_color {"hint":"cold"}' });
    const third = await runOnce(agent, wire);
    validateAll(third.sent);
    expect(textOf(third.sent)).toMatch(/Tool "pick_color" was not offered in this request\.$/);
    expect(finished(third.sent)["outcome"]).toEqual({ type: "success" });
    const after = await json<{ items: unknown[] }>(await call("GET", `/v1/sessions/${name}/pending`, { token: t }));
    expect(after.items).toEqual([]);
  });

  it("refuses page tools that would shadow a tool, writing nothing", async () => {
    const name = uniqueSession("ag-ui-busy");
    const t = await token(TENANT, "client");
    expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: { model: "echo-slow" } })).status).toBe(201);
    const base = { threadId: "root", runId: "r", context: [] };
    const tool = { name: "pick_color", description: "pick", parameters: {} };
    const run = (id: string, tools: unknown[]) =>
      call("POST", `/v1/sessions/${name}/ag-ui`, {
        token: t,
        body: { ...base, messages: [{ id, role: "user", content: "hi" }], tools },
      });
    for (const [tools, field] of [
      [[{ ...tool, name: "echo" }], "tools.0.name"],
      [[tool, tool], "tools.1.name"],
    ] as const) {
      const refused = await run("u-refused", [...tools]);
      expect(refused.status, await refused.clone().text()).toBe(422);
      expect(await json(refused)).toMatchObject({ code: "invalid_tool", field });
    }
    const badSchema = await run("u-refused", [{ ...tool, parameters: { type: "string" } }]);
    expect(badSchema.status, await badSchema.clone().text()).toBe(400);
    expect(await json(badSchema)).toMatchObject({ code: "invalid_body", field: "tools.0.parameters" });
    const uncompilable = await run("u-refused", [
      { ...tool, parameters: { type: "object", properties: { a: { $ref: "#/nowhere" } } } },
    ]);
    expect(uncompilable.status, await uncompilable.clone().text()).toBe(422);
    expect(await json(uncompilable)).toMatchObject({ code: "invalid_tool", field: "tools.0.parameters" });

    expect(await userEntries(name, t)).toBe(0);
  });

  it("Page tools sent while a turn is live queue with their input for its own turn", async () => {
    const name = uniqueSession("ag-ui-busy");
    const t = await token(TENANT, "client");
    expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: { model: "echo-slow" } })).status).toBe(201);
    const pickColor = {
      name: "pick_color",
      description: "Ask the person at the page to pick a colour",
      parameters: { type: "object", properties: { hint: { type: "string" } }, required: ["hint"] },
    };
    // A live turn that calls pick_color itself: it was not offered the page's tools, so the call is refused.
    const live = await call("POST", `/v1/sessions/${name}/conversations/root/inputs`, {
      token: t,
      body: { input: '/call pick_color {"hint":"live"}' },
    });
    expect(live.status, await live.clone().text()).toBe(201);
    // A page sends its tools with its message meanwhile (CopilotKit sends them on every run): queued, not refused.
    const { agent, wire } = agentOf(name, t);
    agent.addMessage({ id: "u-queued", role: "user", content: '/call pick_color {"hint":"warm"}' });
    const queued = await runOnce(agent, wire, { tools: [pickColor] });
    validateAll(queued.sent);
    // Its own turn has them: the model's call of pick_color waits for the page.
    const start = queued.sent.find((event) => (event as Wire).type === "TOOL_CALL_START") as Wire;
    expect(start).toMatchObject({ toolCallName: "pick_color" });
    expect(finished(queued.sent)["outcome"]).toEqual({ type: "success", pendingToolCallIds: [start["toolCallId"]] });
    const pending = await json<{ items: { type: string; name: string }[] }>(
      await call("GET", `/v1/sessions/${name}/pending`, { token: t }),
    );
    expect(pending.items).toEqual([expect.objectContaining({ type: "client_tool", name: "pick_color" })]);
    // The live turn had not: its call was refused as not offered.
    const results = await json<{ items: { model: { content: { text?: string }[] }[] }[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result`, { token: t }),
    );
    expect(results.items.map((item) => item.model[0]?.content[0]?.text)).toEqual([
      'Tool "pick_color" was not offered in this request.',
    ]);
    expect(await userEntries(name, t)).toBe(2);
    expect((await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: t })).status).toBe(200);
  });

  it("A user token runs AG-UI in its own session, within its act and its limits", async () => {
    // A user's run is held like a watch, until its token's expiry by the object's clock: keep it at the real time.
    installSeams().time.now = Date.now();
    await putUserTemplate(TENANT);
    const limits = await call("PUT", "/v1/limits", {
      token: await token(TENANT, "operator"),
      body: { user: { inputsPerDay: 1 } },
    });
    expect(limits.status, await limits.clone().text()).toBe(200);
    const alice = await token(TENANT, "user", { sub: "alice" });
    const reader = await token(TENANT, "user", { sub: "alice", act: ["read"] });
    const bob = await token(TENANT, "user", { sub: "bob" });
    const name = uniqueSession("ag-ui-user");
    const created = await call("PUT", `/v1/sessions/${name}`, { token: alice, body: fromTemplate() });
    expect(created.status, await created.clone().text()).toBe(201);
    const body = (id: string) => ({
      threadId: "root",
      runId: `run-${id}`,
      messages: [{ id, role: "user", content: "mine" }],
      tools: [],
      context: [],
    });
    const readOnly = await call("POST", `/v1/sessions/${name}/ag-ui`, { token: reader, body: body("u-1") });
    expect(readOnly.status).toBe(403);
    expect(await json(readOnly)).toMatchObject({ code: "forbidden", field: "token.act" });
    const theirs = await call("POST", `/v1/sessions/${name}/ag-ui`, { token: bob, body: body("u-1") });
    expect(theirs.status).toBe(404);
    expect(await userEntries(name, alice)).toBe(0);

    const { agent, wire } = agentOf(name, alice);
    agent.addMessage({ id: "u-1", role: "user", content: "mine" });
    const first = await runOnce(agent, wire);
    validateAll(first.sent);
    expect(textOf(first.sent)).toBe("mine");
    // Limits: the run's input was admitted and counted; the same run again is not counted, a new one is refused.
    const again = await call("POST", `/v1/sessions/${name}/ag-ui`, { token: alice, body: body("u-1") });
    expect(again.status).toBe(200);
    await again.text();
    const over = await call("POST", `/v1/sessions/${name}/ag-ui`, { token: alice, body: body("u-2") });
    expect(over.status).toBe(429);
    expect(await json(over)).toMatchObject({ code: "rate_limited", field: "user.inputsPerDay" });
    expect(await userEntries(name, alice)).toBe(1);
  });

  it("refuses a page tool named like a selected tool, and an unknown thread, writing nothing", async () => {
    const { name, t } = await newSession(["echo"]);
    const base = { runId: "r", messages: [{ id: "u", role: "user", content: "hi" }], context: [] };
    const clash = await call("POST", `/v1/sessions/${name}/ag-ui`, {
      token: t,
      body: { ...base, threadId: "root", tools: [{ name: "echo", description: "mine", parameters: {} }] },
    });
    expect(clash.status).toBe(422);
    expect(await json(clash)).toMatchObject({ code: "invalid_tool", field: "tools.0.name" });
    const unknown = await call("POST", `/v1/sessions/${name}/ag-ui`, {
      token: t,
      body: { ...base, threadId: "99999", tools: [] },
    });
    expect(unknown.status).toBe(404);
    expect(await userEntries(name, t)).toBe(0);
  });

  it("An AG-UI run without a new message answers the thread's messages", async () => {
    const { name, t } = await newSession();
    // A thread id the client made up (HttpAgent's default is a uuid) names its own conversation.
    const threadId = "8f14e45f-ceea-467a-9af7-3c2b5d6e1a90";
    const run = async (body: Record<string, unknown>): Promise<unknown[]> => {
      const response = await call("POST", `/v1/sessions/${name}/ag-ui`, {
        token: t,
        body: { threadId, runId: crypto.randomUUID(), ...body },
      });
      expect(response.status, await response.clone().text()).toBe(200);
      return dataOf(await response.text());
    };
    const first = await run({ messages: [{ id: "page-1", role: "user", content: "remember me" }] });
    validateAll(first);
    expect(first[0]).toMatchObject({ type: "RUN_STARTED", threadId, protocolVersion: "1.0" });
    expect(textOf(first)).toBe("remember me");
    // The root holds nothing: the thread has a conversation of its own.
    expect(await userEntries(name, t)).toBe(0);

    // A page loading its thread sends no message (and no tools or context): the thread's messages come back.
    const loaded = await run({ messages: [] });
    validateAll(loaded);
    expect(typesOf(loaded)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
    const snapshot = loaded[1] as { messages: { id: string; role: string; content?: string }[] };
    expect(snapshot.messages).toEqual([
      { id: "page-1", role: "user", content: "remember me" },
      expect.objectContaining({ role: "assistant", content: "remember me" }),
    ]);
    expect(finished(loaded)["outcome"]).toEqual({ type: "success" });
    // Nothing was written: the same again answers the same.
    expect(typesOf(await run({ messages: [] }))).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
    expect(await userEntries(name, t)).toBe(0);

    // A thread whose turn waits on an approval: loading it answers the waiting interrupt too.
    await defineTool("deploy", { handler: { type: "client", timeoutMs: 86_400_000 }, approval: "always" });
    const deploying = await newSession(["deploy"]);
    const ask = await call("POST", `/v1/sessions/${deploying.name}/ag-ui`, {
      token: deploying.t,
      body: {
        threadId: "desk",
        runId: "r1",
        messages: [{ id: "d-1", role: "user", content: '/call deploy {"id":1}' }],
      },
    });
    expect(ask.status).toBe(200);
    await ask.text();
    const [item] = (
      await json<{ items: { id: string }[] }>(await call("GET", `/v1/sessions/${deploying.name}/pending`, { token: t }))
    ).items;
    const reload = await call("POST", `/v1/sessions/${deploying.name}/ag-ui`, {
      token: deploying.t,
      body: { threadId: "desk", runId: "r2", messages: [] },
    });
    const reloaded = dataOf(await reload.text());
    validateAll(reloaded);
    expect(typesOf(reloaded)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
    expect(finished(reloaded)["outcome"]).toEqual({
      type: "interrupt",
      interrupts: [expect.objectContaining({ id: item?.id, reason: "tool_approval", toolCallId: expect.any(String) })],
    });
  });

  it("A run whose page lacks the thread's messages starts with MESSAGES_SNAPSHOT of them", async () => {
    const { name, t } = await newSession();
    const threadId = "two-tabs";
    const first = agentOf(name, t, threadId);
    first.agent.addMessage({ id: "u-a", role: "user", content: "from the first tab" });
    const a = await runOnce(first.agent, first.wire);
    expect(typesOf(a.sent)).not.toContain("MESSAGES_SNAPSHOT");

    // A second tab that kept no history sends a new message: the run starts with what the thread holds before it.
    const second = agentOf(name, t, threadId);
    second.agent.addMessage({ id: "u-b", role: "user", content: "from the second tab" });
    const b = await runOnce(second.agent, second.wire);
    validateAll(b.sent);
    expect(typesOf(b.sent).slice(0, 2)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
    const snapshot = b.sent[1] as { messages: { id: string; role: string; content?: string }[] };
    expect(snapshot.messages).toEqual([
      { id: "u-a", role: "user", content: "from the first tab" },
      expect.objectContaining({ role: "assistant", content: "from the first tab" }),
      { id: "u-b", role: "user", content: "from the second tab" },
    ]);
    expect(textOf(b.sent)).toBe("from the second tab");
    // @ag-ui/client merges a snapshot into the page's list: what the page held keeps its place, the rest is added.
    expect(second.agent.messages.map((m) => `${m.role}: ${String(m.content)}`).sort()).toEqual([
      "assistant: from the first tab",
      "assistant: from the second tab",
      "user: from the first tab",
      "user: from the second tab",
    ]);

    // The first tab lacks the second's exchange: its next run catches up the same way.
    first.agent.addMessage({ id: "u-c", role: "user", content: "back in the first tab" });
    const c = await runOnce(first.agent, first.wire);
    validateAll(c.sent);
    expect(typesOf(c.sent).slice(0, 2)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
    expect(first.agent.messages.map((m) => String(m.content)).sort()).toEqual([
      "back in the first tab",
      "back in the first tab",
      "from the first tab",
      "from the first tab",
      "from the second tab",
      "from the second tab",
    ]);
    // A page that holds it all gets no snapshot.
    second.agent.setMessages(first.agent.messages);
    second.agent.addMessage({ id: "u-d", role: "user", content: "all caught up" });
    const d = await runOnce(second.agent, second.wire);
    expect(typesOf(d.sent)).not.toContain("MESSAGES_SNAPSHOT");
    expect(textOf(d.sent)).toBe("all caught up");
  });

  it("An edited AG-UI message continues on a fork and the thread follows it", async () => {
    const { name, t } = await newSession();
    const { agent, wire } = agentOf(name, t);
    agent.addMessage({ id: "u-1", role: "user", content: "hello" });
    await runOnce(agent, wire);

    // The page edits its message (same id, another text) and runs: a fork before it, where the new text is the input.
    agent.setMessages([{ id: "u-1", role: "user", content: "hello, edited" }]);
    const edited = await runOnce(agent, wire);
    validateAll(edited.sent);
    expect(typesOf(edited.sent).slice(0, 2)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
    expect((edited.sent[1] as { messages: unknown[] }).messages).toEqual([
      { id: "u-1", role: "user", content: "hello, edited" },
    ]);
    expect(textOf(edited.sent)).toBe("hello, edited");
    expect(agent.messages.map((m) => [m.id, m.role, m.content])).toEqual([
      ["u-1", "user", "hello, edited"],
      [expect.any(String), "assistant", "hello, edited"],
    ]);
    // The thread follows the fork; the conversation root keeps what it said.
    const loaded = await loadThread(name, t, "root");
    expect(loaded.map((m) => m.content)).toEqual(["hello, edited", "hello, edited"]);
    expect(await userTexts(name, t, "root")).toEqual(["hello"]);

    // The edited run sent again is a continuation on the fork: no second input.
    const again = await runOnce(agent, wire);
    expect(typesOf(again.sent)).toEqual(["RUN_STARTED", "RUN_FINISHED"]);
    expect(await loadThread(name, t, "root")).toEqual(loaded);
  });

  it("An AG-UI regenerate runs the answer again on a fork", async () => {
    const { name, t } = await newSession();
    const threadId = "regenerating";
    const { agent, wire } = agentOf(name, t, threadId);
    agent.addMessage({ id: "u-1", role: "user", content: "say it" });
    const first = await runOnce(agent, wire);
    const answer = first.sent.find((event) => (event as Wire).type === "TEXT_MESSAGE_START") as Wire;

    // forwardedProps.trigger "regenerate-message": the answer to the newest user message runs again on a fork.
    const again = await runOnce(agent, wire, { forwardedProps: { trigger: "regenerate-message" } });
    validateAll(again.sent);
    expect(typesOf(again.sent).slice(0, 2)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
    const regenerated = again.sent.find((event) => (event as Wire).type === "TEXT_MESSAGE_START") as Wire;
    expect(regenerated["messageId"]).not.toBe(answer["messageId"]);
    expect(textOf(again.sent)).toBe("say it");
    // The page shows one exchange: its message and the new answer (the snapshot dropped the old one).
    expect(agent.messages.map((m) => [m.id, m.content])).toEqual([
      ["u-1", "say it"],
      [regenerated["messageId"], "say it"],
    ]);
    const loaded = await loadThread(name, t, threadId);
    expect(loaded.map((m) => m.id)).toEqual(["u-1", regenerated["messageId"]]);

    // Nothing to regenerate (no user message) is 400, writing nothing.
    const refused = await call("POST", `/v1/sessions/${name}/ag-ui`, {
      token: t,
      body: { threadId, runId: "r-none", messages: [], forwardedProps: { trigger: "regenerate-message" } },
    });
    expect(refused.status, await refused.clone().text()).toBe(400);
    expect(await loadThread(name, t, threadId)).toEqual(loaded);
  });
});
