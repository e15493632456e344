/**
 * The AI SDK chat routes (docs/frontends.md, issue 36 §1): the real `ai` package's `DefaultChatTransport`
 * (its `fetch` is `SELF.fetch`) and `readUIMessageStream` talk to a session: the answer arrives as UI
 * message parts, a resend is one input, an approval answered from the page answers its pending item once,
 * and a reload resumes the live turn once (204 when idle).
 */
import { SELF } from "cloudflare:test";
import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  validateUIMessages,
  type UIMessage,
  type UIMessageChunk,
} from "ai";
import { EventSchemas } from "@ag-ui/core/schemas";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/storage/records.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { setWatchSeams } from "../../src/worker/watch/transport.js";
import { BASE, call, client, json, token, uniqueSession, until } from "./http-fixtures.js";
import { fromTemplate, putUserTemplate } from "./users-fixtures.js";
import { installSeams, ManualClock, resetSeams, type Seams } from "./session-fixtures.js";

let seams: Seams;
let tenants = 0;
let TENANT = "chat";

beforeEach(() => {
  seams = installSeams();
  tenants += 1;
  TENANT = `chat-${tenants}-${Date.now().toString(36)}`;
});

afterEach(() => {
  resetSeams();
  setWatchSeams({});
});

async function sessionWith(config: JsonObject = {}): Promise<{ name: string; t: string }> {
  const name = uniqueSession("chat");
  const t = await token(TENANT, "client");
  const created = await call("PUT", `/v1/sessions/${name}`, { token: t, body: config });
  expect(created.status, await created.clone().text()).toBe(201);
  return { name, t };
}

function transportOf(name: string, t: string): DefaultChatTransport<UIMessage> {
  return new DefaultChatTransport<UIMessage>({
    api: `${BASE}/v1/sessions/${name}/chat`,
    headers: { authorization: `Bearer ${t}` },
    fetch: (input, init) => SELF.fetch(input, init),
  });
}

function userMessage(id: string, text: string): UIMessage {
  return { id, role: "user", parts: [{ type: "text", text }] };
}

/** Every chunk of a stream, in order. */
async function chunksOf(stream: ReadableStream<UIMessageChunk>): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  const reader = stream.getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return out;
    out.push(next.value);
  }
}

/** The assistant message a stream builds, as useChat folds it (optionally continuing `message`). */
async function messageOf(stream: ReadableStream<UIMessageChunk>, message?: UIMessage): Promise<UIMessage> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream<UIMessage>({
    stream,
    ...(message === undefined ? {} : { message }),
    terminateOnError: true,
  }))
    last = m;
  if (last === undefined) throw new Error("the stream built no message");
  return last;
}

function textOf(message: UIMessage): string {
  return message.parts.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/** A product endpoint on the fetch seam (sessions opened from now on): answers `output`, records each URL. */
function productSeam(output: string): string[] {
  const product: string[] = [];
  setHostSeams({
    clock: () => new ManualClock(seams.time),
    version: () => seams.version,
    report: (report) => seams.reports.push(report),
    fetch: (request) => {
      product.push(request.url);
      return Promise.resolve(Response.json({ output }));
    },
  });
  return product;
}

async function defineTool(name: string, definition: JsonObject): Promise<void> {
  const response = await call("PUT", `/v1/tools/${name}`, {
    token: await token(TENANT, "operator"),
    body: {
      description: `${name} (test)`,
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      ...definition,
    },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

async function pendingIds(name: string, t: string): Promise<string[]> {
  const response = await call("GET", `/v1/sessions/${name}/pending`, { token: t });
  expect(response.status).toBe(200);
  return (await json<{ items: { id: string }[] }>(response)).items.map((item) => item.id);
}

async function toolResults(name: string, t: string): Promise<number> {
  const response = await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result`, { token: t });
  expect(response.status).toBe(200);
  return (await json<{ items: unknown[] }>(response)).items.length;
}

async function userEntries(name: string, t: string): Promise<number> {
  const response = await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=user`, { token: t });
  expect(response.status).toBe(200);
  return (await json<{ items: unknown[] }>(response)).items.length;
}

describe("AI SDK chat (UI message stream v1)", () => {
  it("useChat over DefaultChatTransport gets the answer as UI message parts", async () => {
    const { name, t } = await sessionWith();
    // The raw response: the protocol's header, SSE data lines, [DONE] last.
    const raw = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [userMessage("m-raw", "hello there")], trigger: "submit-message" },
    });
    expect(raw.status).toBe(200);
    expect(raw.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    expect(raw.headers.get("content-type")).toContain("text/event-stream");
    const lines = (await raw.text()).split("\n\n").filter((line) => line !== "");
    expect(lines.at(-1)).toBe("data: [DONE]");
    expect(lines.every((line) => line.startsWith("data: "))).toBe(true);
    // (A text may arrive in several deltas as its generation commits; they are one run here.)
    const types = lines
      .slice(0, -1)
      .map((line) => (JSON.parse(line.slice(6)) as { type: string }).type)
      .filter((type, i, all) => type !== "text-delta" || all[i - 1] !== "text-delta");
    expect(types).toEqual(["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]);

    // The real transport and the real fold.
    const transport = transportOf(name, t);
    const stream = await transport.sendMessages({
      chatId: "root",
      messages: [userMessage("m-1", "what a day")],
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: undefined,
    });
    const message = await messageOf(stream);
    expect(message.role).toBe("assistant");
    expect(textOf(message)).toBe("what a day");
    expect(message.parts.map((part) => part.type)).toEqual(["step-start", "text"]);

    // History as UIMessage[]: both turns, stable ids.
    const history = await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t });
    expect(history.status).toBe(200);
    const messages = await json<UIMessage[]>(history);
    expect(messages.map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "hello there"],
      ["assistant", "hello there"],
      ["user", "what a day"],
      ["assistant", "what a day"],
    ]);
    // The stream named its message as the history does.
    expect(messages[3]?.id).toBe(message.id);
    const again = await (await client(TENANT)).session(name).conversation("root").chatMessages();
    expect(again.map((m) => m.id)).toEqual(messages.map((m) => m.id));

    // Bad input is a typed problem and writes nothing.
    const before = await userEntries(name, t);
    const regenerate = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [userMessage("m-2", "again")], trigger: "regenerate-message", messageId: "x" },
    });
    expect(regenerate.status).toBe(400);
    expect(await json(regenerate)).toMatchObject({ code: "invalid_body", field: "messageId" });
    const unknown = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "999999", messages: [userMessage("m-3", "hi")], trigger: "submit-message" },
    });
    expect(unknown.status).toBe(404);
    const noUser = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [{ id: "a", role: "assistant", parts: [] }], trigger: "submit-message" },
    });
    expect(noUser.status).toBe(400);
    expect(await json(noUser)).toMatchObject({ code: "invalid_body", field: "messages" });
    await expect(
      transport.sendMessages({
        chatId: "no such id!",
        messages: [userMessage("m-4", "hi")],
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      }),
    ).rejects.toThrow();
    expect(await userEntries(name, t)).toBe(before);
  });

  it("A chat message sent while another turn runs streams its own turn when it runs", async () => {
    const { name, t } = await sessionWith({ model: "echo-slow" });
    const first = "one two three four five six";
    const busy = await call("POST", `/v1/sessions/${name}/conversations/root/inputs`, {
      token: t,
      body: { input: first },
    });
    expect(busy.status).toBe(201);
    const stream = await transportOf(name, t).sendMessages({
      chatId: "root",
      messages: [userMessage("m-queued", "after that")],
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: undefined,
    });
    const message = await messageOf(stream);
    // Only its own answer: nothing of the turn it waited behind.
    expect(textOf(message)).toBe("after that");
    const history = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(history.map((m) => [m.role, textOf(m)])).toEqual([
      ["user", first],
      ["assistant", first],
      ["user", "after that"],
      ["assistant", "after that"],
    ]);
    expect(history[3]?.id).toBe(message.id);
  });

  it("A user token chats in its own session, within its act", async () => {
    // A user's stream is held like a watch, until its token's expiry by the object's clock: keep it at the real time.
    seams.time.now = Date.now();
    await putUserTemplate(TENANT);
    const limits = await call("PUT", "/v1/limits", {
      token: await token(TENANT, "operator"),
      body: { user: { inputsPerDay: 1 } },
    });
    expect(limits.status, await limits.clone().text()).toBe(200);
    const alice = await token(TENANT, "user", { sub: "alice" });
    const reader = await token(TENANT, "user", { sub: "alice", act: ["read"] });
    const bob = await token(TENANT, "user", { sub: "bob" });
    const name = uniqueSession("chat-user");
    const created = await call("PUT", `/v1/sessions/${name}`, { token: alice, body: fromTemplate() });
    expect(created.status, await created.clone().text()).toBe(201);
    const body = { id: "root", messages: [userMessage("u-1", "mine")], trigger: "submit-message" };

    const readOnly = await call("POST", `/v1/sessions/${name}/chat`, { token: reader, body });
    expect(readOnly.status).toBe(403);
    expect(await json(readOnly)).toMatchObject({ code: "forbidden", field: "token.act" });
    const theirs = await call("POST", `/v1/sessions/${name}/chat`, { token: bob, body });
    expect(theirs.status).toBe(404);
    expect((await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: bob })).status).toBe(404);
    expect((await call("GET", `/v1/sessions/${name}/chat/root/stream`, { token: bob })).status).toBe(404);
    expect(await userEntries(name, alice)).toBe(0);

    expect(
      textOf(
        await messageOf(
          await transportOf(name, alice).sendMessages({
            chatId: "root",
            messages: [userMessage("u-1", "mine")],
            trigger: "submit-message",
            messageId: undefined,
            abortSignal: undefined,
          }),
        ),
      ),
    ).toBe("mine");
    // Limits: a chat message is an input, admitted and counted; a resend is not counted again.
    const resend = await call("POST", `/v1/sessions/${name}/chat`, { token: alice, body });
    expect(resend.status).toBe(200);
    await resend.text();
    const over = await call("POST", `/v1/sessions/${name}/chat`, {
      token: alice,
      body: { ...body, messages: [userMessage("u-2", "more")] },
    });
    expect(over.status).toBe(429);
    expect(await json(over)).toMatchObject({ code: "rate_limited", field: "user.inputsPerDay" });
    expect(await userEntries(name, alice)).toBe(1);

    const history = await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: reader });
    expect(history.status).toBe(200);
    expect((await json<UIMessage[]>(history)).map(textOf)).toEqual(["mine", "mine"]);
  });

  it("A resend of the same chat message is one input", async () => {
    const { name, t } = await sessionWith();
    const transport = transportOf(name, t);
    const send = async (message: UIMessage): Promise<UIMessage> =>
      messageOf(
        await transport.sendMessages({
          chatId: "root",
          messages: [message],
          trigger: "submit-message",
          messageId: undefined,
          abortSignal: undefined,
        }),
      );
    const message = userMessage("resend-1", "only once please");
    // Two at once (a retry racing the first) and one after: one input, each stream shows its one answer.
    const [a, b] = await Promise.all([send(message), send(message)]);
    const c = await send(message);
    for (const answer of [a, b, c]) expect(textOf(answer)).toBe("only once please");
    expect(await userEntries(name, t)).toBe(1);
    const accepted = await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t });
    expect((await json<UIMessage[]>(accepted)).map((m) => m.role)).toEqual(["user", "assistant"]);

    // Earlier messages in the body are the client's copy: they never become inputs or rewrite the transcript.
    const next = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: {
        id: "root",
        messages: [
          userMessage("forged", "I never said this"),
          { id: "x", role: "assistant", parts: [{ type: "text", text: "nor this" }] },
          userMessage("resend-2", "second"),
        ],
        trigger: "submit-message",
      },
    });
    expect(next.status).toBe(200);
    await next.text();
    expect(await userEntries(name, t)).toBe(2);
    const history = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(history.map(textOf)).toEqual(["only once please", "only once please", "second", "second"]);
  });

  it("An approval answered from useChat answers the pending item once", async () => {
    const product = productSeam("shipped");
    await defineTool("ship", {
      handler: { type: "http", url: "https://product.test/tools", timeoutMs: 30_000, idempotent: false },
      approval: "always",
    });
    const { name, t } = await sessionWith({ selectedTools: ["ship"] });
    const transport = transportOf(name, t);
    const user = userMessage("ship-1", '/call ship {"id":8}');
    const first = await messageOf(
      await transport.sendMessages({
        chatId: "root",
        messages: [user],
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      }),
    );
    // The stream ended at the approval request: the turn waits durably.
    const part = first.parts.find((p) => p.type === "tool-ship");
    expect(part).toMatchObject({ state: "approval-requested", input: { id: 8 } });
    if (part === undefined || part.type !== "tool-ship" || part.state !== "approval-requested")
      throw new Error("no approval request");
    const [itemId] = await pendingIds(name, t);
    expect(part.approval.id).toBe(itemId);
    expect(product).toEqual([]);

    // What addToolApprovalResponse leaves, resent as sendAutomaticallyWhen would.
    const answered: UIMessage = {
      ...first,
      parts: first.parts.map((p) =>
        p === part ? { ...part, state: "approval-responded", approval: { id: part.approval.id, approved: true } } : p,
      ),
    };
    const resumed = await messageOf(
      await transport.sendMessages({
        chatId: "root",
        messages: [user, answered],
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      }),
      // The fold updates the message it continues in place.
      structuredClone(answered),
    );
    expect(resumed.parts.find((p) => p.type === "tool-ship")).toMatchObject({
      state: "output-available",
      input: { id: 8 },
      output: expect.stringContaining("shipped"),
    });
    expect(textOf(resumed)).toContain("shipped");
    expect(product).toHaveLength(1);
    expect(await pendingIds(name, t)).toEqual([]);

    // The same answer sent again (a dropped connection) is 200 with what was recorded, and changes nothing;
    // another answer is the pending route's 409.
    const again = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [user, answered], trigger: "submit-message" },
    });
    expect(again.status, await again.clone().text()).toBe(200);
    await again.text();
    const denied: UIMessage = {
      ...first,
      parts: first.parts.map((p) =>
        p === part ? { ...part, state: "approval-responded", approval: { id: part.approval.id, approved: false } } : p,
      ),
    };
    const other = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [user, denied], trigger: "submit-message" },
    });
    expect(other.status, await other.clone().text()).toBe(409);
    expect(await json(other)).toMatchObject({ code: "already_answered", answer: { approve: true } });
    expect(await toolResults(name, t)).toBe(1);
    expect(await userEntries(name, t)).toBe(1);
    expect(product).toHaveLength(1);
  });

  it("A client tool's output added from useChat answers its pending item", async () => {
    await defineTool("confirm", { handler: { type: "client", timeoutMs: 86_400_000 } });
    const { name, t } = await sessionWith({ selectedTools: ["confirm"] });
    const transport = transportOf(name, t);
    const user = userMessage("confirm-1", '/call confirm {"id":3}');
    const send = (messages: UIMessage[]): Promise<ReadableStream<UIMessageChunk>> =>
      transport.sendMessages({
        chatId: "root",
        messages,
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      });
    const first = await messageOf(await send([user]));
    // The stream ends with the call the page must answer.
    const part = first.parts.find((p) => p.type === "tool-confirm");
    expect(part).toMatchObject({ state: "input-available", input: { id: 3 } });
    if (part === undefined || part.type !== "tool-confirm") throw new Error("no client tool call");
    expect(await pendingIds(name, t)).toHaveLength(1);
    // What addToolOutput leaves, resent.
    const answered: UIMessage = {
      ...first,
      parts: first.parts.map((p) =>
        p === part
          ? {
              type: "tool-confirm",
              toolCallId: part.toolCallId,
              state: "output-available",
              input: { id: 3 },
              output: "yes",
            }
          : p,
      ),
    };
    const resumed = await messageOf(await send([user, answered]), structuredClone(answered));
    expect(resumed.parts.find((p) => p.type === "tool-confirm")).toMatchObject({
      state: "output-available",
      output: "yes",
    });
    expect(textOf(resumed)).toContain("yes");
    expect(await pendingIds(name, t)).toEqual([]);
    expect(await toolResults(name, t)).toBe(1);
  });

  it("The abort route stops a chat turn: its stream ends with abort and finish", async () => {
    const { name, t } = await sessionWith({ model: "echo-slow" });
    // Keep-alive comments (every 5 ms here) keep a quiet stream open; the AI SDK's parser skips them.
    setWatchSeams({ keepAliveMs: 5 });
    const response = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [userMessage("stop-1", "a long answer to stop")], trigger: "submit-message" },
    });
    expect(response.status).toBe(200);
    const body = response.text();
    const aborted = await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: t });
    expect(aborted.status).toBe(200);
    const parts = (await body)
      .split("\n\n")
      .filter((line) => line.startsWith("data: {"))
      .map((line) => JSON.parse(line.slice(6)) as { type: string });
    expect(parts.slice(-2).map((p) => p.type)).toEqual(["abort", "finish"]);
    expect(await body).toContain(": keep-alive\n\n");
    expect(parts[0]?.type).toBe("start");
  });

  it("Resume after reload streams the live turn once; 204 when idle", async () => {
    const { name, t } = await sessionWith({ model: "echo-slow" });
    const transport = transportOf(name, t);
    // Nothing live yet.
    expect(await transport.reconnectToStream({ chatId: "root" })).toBeNull();
    const idle = await call("GET", `/v1/sessions/${name}/chat/root/stream`, { token: t });
    expect(idle.status).toBe(204);

    // The page sends, then reloads mid-answer: its POST stream is dropped after the start.
    const controller = new AbortController();
    const stream = await transport.sendMessages({
      chatId: "root",
      messages: [userMessage("slow-1", "a slow and careful answer")],
      trigger: "submit-message",
      messageId: undefined,
      abortSignal: controller.signal,
    });
    const reader = stream.getReader();
    expect((await reader.read()).value).toMatchObject({ type: "start" });
    controller.abort();
    await reader.cancel().catch(() => undefined);

    const resumed = await transport.reconnectToStream({ chatId: "root" });
    if (resumed === null) throw new Error("nothing live after the POST");
    const chunks = await chunksOf(resumed);
    // The answer streamed while it was generated (the generation's committed preview), not only at its end.
    const deltas = chunks.filter((c) => c.type === "text-delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((c) => c.delta).join("")).toBe("a slow and careful answer");
    const message = await messageOf(
      new ReadableStream<UIMessageChunk>({
        start(controller) {
          for (const chunk of chunks) controller.enqueue(chunk);
          controller.close();
        },
      }),
    );
    // The whole answer, once.
    expect(textOf(message)).toBe("a slow and careful answer");
    expect(message.parts.filter((p) => p.type === "text")).toHaveLength(1);
    expect(await userEntries(name, t)).toBe(1);

    // The turn is over: nothing live.
    await until(
      async () =>
        (await call("GET", `/v1/sessions/${name}/chat/root/stream`, { token: t })).status === 204 ? true : undefined,
      "the conversation idle",
    );
    expect(await transport.reconnectToStream({ chatId: "root" })).toBeNull();
  });

  it("Chunks and events have the shapes the libraries define", async () => {
    await defineTool("confirm", { handler: { type: "client", timeoutMs: 86_400_000 } });
    await defineTool("erase", { handler: { type: "client", timeoutMs: 86_400_000 }, approval: "always" });
    const { name, t } = await sessionWith({ selectedTools: ["confirm", "erase"] });
    const post = async (body: Record<string, unknown>): Promise<{ status: number; chunks: JsonObject[] }> => {
      const response = await call("POST", `/v1/sessions/${name}/chat`, { token: t, body: { id: "root", ...body } });
      if (response.status !== 200 || response.body === null)
        return { status: response.status, chunks: [await json<JsonObject>(response)] };
      // Read as the AI SDK reads it: every chunk must pass `ai`'s own chunk schema.
      const chunks: JsonObject[] = [];
      const reader = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }).getReader();
      for (;;) {
        const next = await reader.read();
        if (next.done) break;
        expect(next.value.success, JSON.stringify(next.value)).toBe(true);
        if (next.value.success) chunks.push(next.value.value as unknown as JsonObject);
      }
      return { status: response.status, chunks };
    };

    // A tool call streams its input (start, delta, available); finish says why and carries the message metadata.
    const confirm = userMessage("shape-1", '/call confirm {"id":3}');
    const first = await post({ messages: [confirm] });
    expect(first.status).toBe(200);
    const types = first.chunks.map((chunk) => chunk["type"]);
    expect(types.indexOf("tool-input-start")).toBeGreaterThan(-1);
    expect(types.indexOf("tool-input-start")).toBeLessThan(types.indexOf("tool-input-delta"));
    expect(types.indexOf("tool-input-delta")).toBeLessThan(types.indexOf("tool-input-available"));
    // The deltas join into exactly the call's final arguments JSON.
    const joined = first.chunks
      .filter((chunk) => chunk["type"] === "tool-input-delta")
      .map((chunk) => String(chunk["inputTextDelta"]))
      .join("");
    expect(joined).toBe(JSON.stringify({ id: 3 }));
    expect(first.chunks.filter((chunk) => chunk["type"] === "tool-input-start")).toHaveLength(1);
    expect(first.chunks.at(-1)).toMatchObject({ type: "finish", finishReason: "tool-calls" });
    const available = first.chunks.find((chunk) => chunk["type"] === "tool-input-available");
    const callId = String(available?.["toolCallId"]);

    // A client tool's object output comes back as the object, not as a JSON string.
    const answered = {
      id: "a",
      role: "assistant",
      parts: [
        { type: "tool-confirm", toolCallId: callId, state: "output-available", input: { id: 3 }, output: { ok: true } },
      ],
    };
    const second = await post({ messages: [confirm, answered] });
    expect(second.chunks.find((chunk) => chunk["type"] === "tool-output-available")).toMatchObject({
      toolCallId: callId,
      output: { ok: true },
    });
    const finish = second.chunks.at(-1);
    expect(finish).toMatchObject({
      type: "finish",
      finishReason: "stop",
      messageMetadata: { model: expect.any(String), createdAt: expect.any(Number), usage: expect.any(Object) },
    });
    const history = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(history[1]?.parts.find((part) => part.type === "tool-confirm")).toMatchObject({ output: { ok: true } });

    // A denied approval is tool-output-denied.
    const erase = userMessage("shape-2", '/call erase {"id":4}');
    const asked = await post({ messages: [erase] });
    const request = asked.chunks.find((chunk) => chunk["type"] === "tool-approval-request");
    if (request === undefined) throw new Error("no approval request");
    // The approval request arrives inside its step, before that step's finish-step.
    const askedTypes = asked.chunks.map((chunk) => chunk["type"]);
    expect(askedTypes.slice(askedTypes.indexOf("tool-approval-request"))).toEqual([
      "tool-approval-request",
      "finish-step",
      "finish",
    ]);
    const denied = await post({
      messages: [
        erase,
        {
          id: "b",
          role: "assistant",
          parts: [
            {
              type: "tool-erase",
              toolCallId: request["toolCallId"],
              state: "approval-responded",
              input: { id: 4 },
              approval: { id: request["approvalId"], approved: false },
            },
          ],
        },
      ],
    });
    expect(denied.chunks).toContainEqual({ type: "tool-output-denied", toolCallId: request["toolCallId"] });
    expect(denied.chunks.some((chunk) => chunk["type"] === "tool-output-error")).toBe(false);

    // A file part is refused naming it, never dropped; nothing is written.
    const before = await userEntries(name, t);
    const withFile = await post({
      messages: [
        {
          id: "shape-3",
          role: "user",
          parts: [
            { type: "text", text: "look" },
            { type: "file", mediaType: "application/pdf", url: "https://example.test/a.pdf" },
          ],
        },
      ],
    });
    expect(withFile.status).toBe(415);
    expect(withFile.chunks[0]).toMatchObject({ code: "unsupported_media_type", field: "messages[0].parts[1]" });
    // An image part reaches a model that takes images (echo names it) and comes back in the history as a file part.
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
    const image = { type: "file", mediaType: "image/png", url: `data:image/png;base64,${png}` };
    const withImage = await post({
      messages: [{ id: "shape-img", role: "user", parts: [{ type: "text", text: "see" }, image] }],
    });
    expect(withImage.status).toBe(200);
    const seen = withImage.chunks
      .filter((chunk) => chunk["type"] === "text-delta")
      .map((chunk) => String(chunk["delta"]))
      .join("");
    expect(seen).toBe("see [image image/png]");
    const shown = await validateUIMessages<UIMessage>({
      messages: await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t })),
    });
    expect(shown.find((message) => message.id === "shape-img")?.parts).toEqual([
      { type: "text", text: "see", state: "done" },
      image,
    ]);
    // A long history (over 1 MB) is accepted: the page resends it with every message; `{ id, message }` too.
    const long = await post({
      messages: [
        { id: "old", role: "assistant", parts: [{ type: "text", text: "x".repeat(1_500_000) }] },
        userMessage("shape-4", "after a long history"),
      ],
    });
    expect(long.status).toBe(200);
    const alone = await post({ message: userMessage("shape-5", "only the last message") });
    expect(alone.status).toBe(200);
    expect(await userEntries(name, t)).toBe(before + 3);

    // AG-UI: RUN_STARTED names the protocol version; `tools` and `context` may be left out; an image content part
    // reaches the model, a document that is not an image is refused naming it. Every event validates.
    const agUi = async (messages: JsonObject[]): Promise<{ status: number; events: JsonObject[] }> => {
      const response = await call("POST", `/v1/sessions/${name}/ag-ui`, {
        token: t,
        body: { threadId: "root", runId: `run-${messages.length}-${String(messages[0]?.["id"])}`, messages },
      });
      const text = await response.text();
      if (response.status !== 200) return { status: response.status, events: [JSON.parse(text) as JsonObject] };
      const events = text
        .split("\n\n")
        .filter((block) => block.startsWith("data: {"))
        .map((block) => JSON.parse(block.slice(6)) as JsonObject);
      for (const event of events) expect(EventSchemas.safeParse(event).success, JSON.stringify(event)).toBe(true);
      return { status: response.status, events };
    };
    const run = await agUi([
      {
        id: "shape-ag-1",
        role: "user",
        content: [
          { type: "text", text: "and this" },
          { type: "image", source: { type: "data", value: png, mimeType: "image/png" } },
        ],
      },
    ]);
    expect(run.status).toBe(200);
    expect(run.events[0]).toMatchObject({ type: "RUN_STARTED", protocolVersion: "1.0" });
    expect(
      run.events
        .filter((event) => event["type"] === "TEXT_MESSAGE_CONTENT")
        .map((event) => String(event["delta"]))
        .join(""),
    ).toBe("and this [image image/png]");
    const document = await agUi([
      {
        id: "shape-ag-2",
        role: "user",
        content: [
          { type: "text", text: "and this" },
          { type: "document", source: { type: "data", value: "JVBERi0=", mimeType: "application/pdf" } },
        ],
      },
    ]);
    expect(document.status).toBe(415);
    expect(document.events[0]).toMatchObject({ code: "unsupported_media_type", field: "messages.0.content.1" });
    expect(await userEntries(name, t)).toBe(before + 4);
  });
});
