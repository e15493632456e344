/**
 * A chat is a named pointer to a branch (docs/frontends.md "A chat is a pointer"): the real `ai` package's
 * `AbstractChat` (what `useChat` runs) over `DefaultChatTransport` (its `fetch` is `SELF.fetch`) reloads, approves,
 * edits and regenerates against a session. A reload continues the turn without a second input, an edit continues
 * on a fork the chat follows, a regeneration runs the answer again on a fork, and a made-up chat id names its own
 * conversation.
 */
import { SELF } from "cloudflare:test";
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessage,
} from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/storage/records.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { setWatchSeams } from "../../src/worker/watch/transport.js";
import { BASE, call, json, stubOf, token, uniqueSession } from "./http-fixtures.js";
import { installSeams, ManualClock, resetSeams, type Seams } from "./session-fixtures.js";

let seams: Seams;
let tenants = 0;
let TENANT = "chat-branches";

beforeEach(() => {
  seams = installSeams();
  tenants += 1;
  TENANT = `chat-branches-${tenants}-${Date.now().toString(36)}`;
});

afterEach(() => {
  resetSeams();
  setWatchSeams({});
});

/** The state a page keeps (React's useChat keeps the same in hooks). */
class PageState implements ChatState<UIMessage> {
  status: ChatStatus = "ready";
  error: Error | undefined = undefined;
  messages: UIMessage[];
  constructor(messages: UIMessage[]) {
    this.messages = messages;
  }
  pushMessage = (message: UIMessage): void => {
    this.messages = [...this.messages, message];
  };
  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage): void => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

/** A page's chat: `AbstractChat` over the page state; `finished()` resolves at the next request's end. */
class PageChat extends AbstractChat<UIMessage> {
  readonly #waiters: (() => void)[];
  constructor(init: Omit<ChatInit<UIMessage>, "onFinish">) {
    const waiters: (() => void)[] = [];
    super({
      ...init,
      state: new PageState(init.messages ?? []),
      onFinish: () => {
        for (const waiter of waiters.splice(0)) waiter();
      },
    });
    this.#waiters = waiters;
  }
  finished(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

async function sessionWith(config: JsonObject = {}): Promise<{ name: string; t: string }> {
  const name = uniqueSession("chatb");
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

function textOf(message: UIMessage | undefined): string {
  return (message?.parts ?? []).map((part) => (part.type === "text" ? part.text : "")).join("");
}

/** What a reload reads: the chat's history from the server. */
async function historyOf(name: string, t: string, chatId: string): Promise<UIMessage[]> {
  const response = await call("GET", `/v1/sessions/${name}/chat/${chatId}/messages`, { token: t });
  expect(response.status, await response.clone().text()).toBe(200);
  return json<UIMessage[]>(response);
}

async function userTexts(name: string, t: string, conversation: string): Promise<string[]> {
  const response = await call("GET", `/v1/sessions/${name}/conversations/${conversation}/entries?kind=user`, {
    token: t,
  });
  expect(response.status).toBe(200);
  const items = (
    await json<{ items: { model: { content: string | { type: string; text?: string }[] }[] }[] }>(response)
  ).items;
  return items.map((item) =>
    item.model
      .map((m) => (typeof m.content === "string" ? m.content : m.content.map((c) => c.text ?? "").join("")))
      .join(""),
  );
}

/** How many conversations the session holds (its export's created conversations, less the deleted ones). */
async function conversationCount(name: string, _t: string): Promise<number> {
  const response = await call("GET", `/v1/sessions/${name}/export`, { token: await token(TENANT, "operator") });
  const text = new TextDecoder().decode(await response.arrayBuffer());
  expect(response.status, text.slice(0, 300)).toBe(200);
  return text.split('"createConversation"').length - text.split('"deleteConversation"').length;
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

describe("Chats are pointers to branches", () => {
  it("After a reload, approving a tool continues the turn and accepts no second input", async () => {
    const product = productSeam("shipped");
    const tool = await call("PUT", "/v1/tools/ship", {
      token: await token(TENANT, "operator"),
      body: {
        description: "ship (test)",
        parameters: { type: "object", properties: { id: { type: "integer" } } },
        handler: { type: "http", url: "https://product.test/tools", timeoutMs: 30_000, idempotent: false },
        approval: "always",
      },
    });
    expect(tool.status, await tool.clone().text()).toBe(201);
    const { name, t } = await sessionWith({ selectedTools: ["ship"] });
    const transport = transportOf(name, t);
    const page = new PageChat({ id: "root", transport });
    await page.sendMessage({ text: '/call ship {"id":8}' });
    const sent = page.messages[0];
    expect(page.lastMessage?.parts.find((p) => p.type === "tool-ship")).toMatchObject({ state: "approval-requested" });

    // The reload: a new page from the server's history. The user message keeps the id the page gave it.
    const history = await historyOf(name, t, "root");
    expect(history.map((m) => m.id)).toEqual(page.messages.map((m) => m.id));
    expect(history[0]?.id).toBe(sent?.id);
    const reloaded = new PageChat({
      id: "root",
      transport,
      messages: history,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    const part = reloaded.lastMessage?.parts.find((p) => p.type === "tool-ship");
    if (part === undefined || part.type !== "tool-ship" || part.state !== "approval-requested")
      throw new Error("the reloaded history shows no approval request");
    const finished = reloaded.finished();
    await reloaded.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await finished;

    expect(reloaded.error).toBeUndefined();
    expect(reloaded.messages).toHaveLength(2);
    expect(reloaded.lastMessage?.parts.find((p) => p.type === "tool-ship")).toMatchObject({
      state: "output-available",
    });
    expect(textOf(reloaded.lastMessage)).toContain("shipped");
    // One input, one call of the tool, nothing waiting for a second approval.
    expect(await userTexts(name, t, "root")).toEqual(['/call ship {"id":8}']);
    expect(product).toHaveLength(1);
    const pending = await call("GET", `/v1/sessions/${name}/pending`, { token: t });
    expect((await json<{ items: unknown[] }>(pending)).items).toEqual([]);
    expect((await historyOf(name, t, "root")).map((m) => m.id)).toEqual(reloaded.messages.map((m) => m.id));

    // The same after a reload with a client tool: the page's output continues the turn; still one input.
    const confirm = await call("PUT", "/v1/tools/confirm", {
      token: await token(TENANT, "operator"),
      body: {
        description: "confirm (test)",
        parameters: { type: "object", properties: { id: { type: "integer" } } },
        handler: { type: "client", timeoutMs: 86_400_000 },
      },
    });
    expect(confirm.status, await confirm.clone().text()).toBe(201);
    const other = await sessionWith({ selectedTools: ["confirm"] });
    const otherTransport = transportOf(other.name, other.t);
    const asking = new PageChat({ id: "root", transport: otherTransport });
    await asking.sendMessage({ text: '/call confirm {"id":9}' });
    expect(asking.lastMessage?.parts.find((p) => p.type === "tool-confirm")).toMatchObject({
      state: "input-available",
    });
    const again = new PageChat({
      id: "root",
      transport: otherTransport,
      messages: await historyOf(other.name, other.t, "root"),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    });
    const asked = again.lastMessage?.parts.find((p) => p.type === "tool-confirm");
    if (asked === undefined || asked.type !== "tool-confirm" || asked.state !== "input-available")
      throw new Error("the reloaded history shows no client tool call");
    const answered = again.finished();
    await again.addToolOutput({ tool: "confirm", toolCallId: asked.toolCallId, output: { confirmed: 9 } });
    await answered;
    expect(again.error).toBeUndefined();
    expect(again.messages).toHaveLength(2);
    expect(textOf(again.lastMessage)).toContain('{"confirmed":9}');
    expect(await userTexts(other.name, other.t, "root")).toEqual(['/call confirm {"id":9}']);
    const none = await call("GET", `/v1/sessions/${other.name}/pending`, { token: other.t });
    expect((await json<{ items: unknown[] }>(none)).items).toEqual([]);
  });

  it("A chat id the client made up names its own conversation across reloads", async () => {
    const { name, t } = await sessionWith();
    const transport = transportOf(name, t);
    const chatId = "page-3f9c_X7";
    expect(await historyOf(name, t, chatId)).toEqual([]);
    const idle = await call("GET", `/v1/sessions/${name}/chat/${chatId}/stream`, { token: t });
    expect(idle.status).toBe(204);

    const page = new PageChat({ id: chatId, transport });
    await page.sendMessage({ text: "hello from a new page" });
    expect(page.error).toBeUndefined();
    expect(textOf(page.lastMessage)).toBe("hello from a new page");
    // Its own conversation: the root holds nothing.
    expect(await userTexts(name, t, "root")).toEqual([]);
    expect(await conversationCount(name, t)).toBe(2);

    const history = await historyOf(name, t, chatId);
    expect(history.map((m) => m.id)).toEqual(page.messages.map((m) => m.id));
    const reloaded = new PageChat({ id: chatId, transport, messages: history });
    await reloaded.sendMessage({ text: "and again" });
    expect(reloaded.error).toBeUndefined();
    expect((await historyOf(name, t, chatId)).map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "hello from a new page"],
      ["assistant", "hello from a new page"],
      ["user", "and again"],
      ["assistant", "and again"],
    ]);
    expect(await conversationCount(name, t)).toBe(2);
    expect(await userTexts(name, t, "root")).toEqual([]);

    // Another made-up id is another conversation; an id outside the rule is a typed 400 and writes nothing.
    const other = new PageChat({ id: "second-page", transport });
    await other.sendMessage({ text: "elsewhere" });
    expect((await historyOf(name, t, "second-page")).map(textOf)).toEqual(["elsewhere", "elsewhere"]);
    expect((await historyOf(name, t, chatId)).map(textOf)).toHaveLength(4);
    const bad = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: { id: "not a chat id!", messages: [{ id: "m", role: "user", parts: [{ type: "text", text: "x" }] }] },
    });
    expect(bad.status).toBe(400);
    expect(await json(bad)).toMatchObject({ code: "invalid_body", field: "id" });
    expect(await conversationCount(name, t)).toBe(3);
  });

  it("An edited message continues on a fork and the chat follows it", async () => {
    const { name, t } = await sessionWith();
    const transport = transportOf(name, t);
    const page = new PageChat({ id: "root", transport });
    await page.sendMessage({ text: "first" });
    await page.sendMessage({ text: "second" });
    const [m1, , m2] = page.messages;
    if (m1 === undefined || m2 === undefined) throw new Error("no messages");

    await page.sendMessage({ text: "second, edited", messageId: m2.id });
    expect(page.error).toBeUndefined();
    expect(page.messages.map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "first"],
      ["assistant", "first"],
      ["user", "second, edited"],
      ["assistant", "second, edited"],
    ]);
    // The chat follows the fork: a reload shows the edited branch, the client's ids kept.
    const history = await historyOf(name, t, "root");
    expect(history.map((m) => m.id)).toEqual(page.messages.map((m) => m.id));
    expect(history[2]?.id).toBe(m2.id);
    // The old branch is a conversation of its own, unchanged.
    expect(await userTexts(name, t, "root")).toEqual(["first", "second"]);
    expect(await conversationCount(name, t)).toBe(2);

    // A reload, then the same edit sent again, is a continuation: no third branch, no new input.
    const reloaded = new PageChat({ id: "root", transport, messages: history });
    await reloaded.sendMessage({ text: "third" });
    expect(reloaded.messages.map(textOf)).toEqual([
      "first",
      "first",
      "second, edited",
      "second, edited",
      "third",
      "third",
    ]);
    expect(await conversationCount(name, t)).toBe(2);

    // Editing the first message forks at "start": the fork has the config it began with.
    await reloaded.sendMessage({ text: "first, edited", messageId: m1.id });
    expect(reloaded.error).toBeUndefined();
    expect((await historyOf(name, t, "root")).map(textOf)).toEqual(["first, edited", "first, edited"]);
    expect(await conversationCount(name, t)).toBe(3);
  });

  it("Regenerate runs the answer again on a fork", async () => {
    const { name, t } = await sessionWith();
    const transport = transportOf(name, t);
    const page = new PageChat({ id: "root", transport });
    await page.sendMessage({ text: "tell me" });
    const first = page.lastMessage;
    if (first === undefined) throw new Error("no answer");

    await page.regenerate();
    expect(page.error).toBeUndefined();
    expect(page.messages.map((m) => [m.role, textOf(m)])).toEqual([
      ["user", "tell me"],
      ["assistant", "tell me"],
    ]);
    // A new answer with its own id; the chat points at its branch; the first answer stays on the old one.
    expect(page.lastMessage?.id).not.toBe(first.id);
    const history = await historyOf(name, t, "root");
    expect(history.map((m) => m.id)).toEqual(page.messages.map((m) => m.id));
    expect(await conversationCount(name, t)).toBe(2);
    expect(await userTexts(name, t, "root")).toEqual(["tell me"]);

    // A regeneration of something the chat does not hold is a typed 400 and writes nothing.
    const bad = await call("POST", `/v1/sessions/${name}/chat`, {
      token: t,
      body: {
        id: "root",
        messages: [{ id: "never", role: "user", parts: [{ type: "text", text: "x" }] }],
        trigger: "regenerate-message",
        messageId: "a999",
      },
    });
    expect(bad.status).toBe(400);
    expect(await json(bad)).toMatchObject({ code: "invalid_body", field: "messageId" });
    expect(await conversationCount(name, t)).toBe(2);
  });

  it("A first message refused after its fork was made takes the fork and the pointer back", async () => {
    const { name, t } = await sessionWith();
    const before = await conversationCount(name, t);
    // Admitted (no limits), its fork made, then refused by the accepting commit: the text alone is over a row. The
    // routes refuse such a message before anything (413 naming its parts), so the session's operation is asked
    // directly, as a route would after a race it cannot see.
    const big = "x".repeat(2_000_000);
    const outcome = await stubOf(TENANT, name).op(
      "chatAccept",
      {
        chatId: "page-big",
        source: "root",
        before: "start",
        expect: null,
        protocol: "chat",
        messageId: "b1",
        rekey: false,
      },
      { input: big, messageId: "b1" },
    );
    expect(outcome.ok).toBe(false);
    expect(outcome.ok ? undefined : outcome.problem.code).toBe("payload_too_large");
    expect(await historyOf(name, t, "page-big")).toEqual([]);
    expect(await conversationCount(name, t)).toBe(before);
    // The chat starts afresh with its next message.
    const page = new PageChat({ id: "page-big", transport: transportOf(name, t) });
    await page.sendMessage({ text: "smaller" });
    expect(page.error).toBeUndefined();
    expect((await historyOf(name, t, "page-big")).map(textOf)).toEqual(["smaller", "smaller"]);
  });
});
