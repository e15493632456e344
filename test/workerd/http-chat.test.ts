/**
 * The AI SDK chat routes (docs/frontends.md, issue 36 §1): the real `ai` package's `DefaultChatTransport`
 * (its `fetch` is `SELF.fetch`) and `readUIMessageStream` talk to a session: the answer arrives as UI
 * message parts, a resend is one input, an approval answered from the page answers its pending item once,
 * and a reload resumes the live turn once (204 when idle).
 */
import { SELF } from "cloudflare:test";
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/storage/records.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { BASE, call, json, token, uniqueSession, until } from "./http-fixtures.js";
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
    const types = lines.slice(0, -1).map((line) => (JSON.parse(line.slice(6)) as { type: string }).type);
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
    const again = await json<UIMessage[]>(await call("GET", `/v1/sessions/${name}/chat/root/messages`, { token: t }));
    expect(again.map((m) => m.id)).toEqual(messages.map((m) => m.id));

    // Bad input is a typed problem and writes nothing.
    const before = await userEntries(name, t);
    const regenerate = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "root", messages: [userMessage("m-2", "again")], trigger: "regenerate-message", messageId: "x" },
    });
    expect(regenerate.status).toBe(422);
    expect(await json(regenerate)).toMatchObject({ code: "unsupported_trigger", field: "trigger" });
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
        chatId: "nope",
        messages: [userMessage("m-4", "hi")],
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      }),
    ).rejects.toThrow();
    expect(await userEntries(name, t)).toBe(before);
  });
});

export { seams, setHostSeams, ManualClock, until };
