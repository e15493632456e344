/**
 * Refused means nothing happened, and revoked means gone, on the frontend protocols (docs/frontends.md): a chat or
 * AG-UI request refused for its input (429 over a limit) records none of the approvals it carries, and a user's
 * revocation ends that user's POST chat and AG-UI streams at once, as it ends watches, while the turn goes on.
 * Real clock (no seams): a user's stream is held until its token's expiry by the object's clock.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

interface Pending {
  readonly items: readonly { readonly id: string; readonly type: string; readonly conversationId: number }[];
}

async function pendingOf(name: string, t: string): Promise<Pending["items"]> {
  return (await json<Pending>(await call("GET", `/v1/sessions/${name}/pending`, { token: t }))).items;
}

async function toolResults(name: string, t: string): Promise<number> {
  const response = await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result`, { token: t });
  return (await json<{ items: unknown[] }>(response)).items.length;
}

/** A client tool `ship` that always asks for approval (a client tool: nothing is called over the network). */
async function shipTool(tenant: string): Promise<void> {
  const response = await call("PUT", "/v1/tools/ship", {
    token: await token(tenant, "operator"),
    body: {
      description: "ship (test)",
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      handler: { type: "client", timeoutMs: 86_400_000 },
      approval: "always",
    },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

/** Read an SSE body until `done(text so far)` or its end; answers the text. */
async function readUntil(body: ReadableStream<Uint8Array>, done: (text: string) => boolean): Promise<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const next = await reader.read();
    if (next.done) return text;
    text += decoder.decode(next.value, { stream: true });
    if (done(text)) {
      reader.releaseLock();
      return text;
    }
  }
}

describe("Frontend requests: refused and revoked", () => {
  it("A refused chat or AG-UI request records none of the answers it carries", async () => {
    const tenant = uniqueSession("refused");
    await shipTool(tenant);
    const t = await token(tenant, "client");
    const limits = await call("PUT", "/v1/limits", {
      token: await token(tenant, "operator"),
      body: { tenant: { inputsPerDay: 2 } },
    });
    expect(limits.status, await limits.clone().text()).toBe(200);
    const sessionFor = async (label: string): Promise<string> => {
      const name = uniqueSession(label);
      const created = await call("PUT", `/v1/sessions/${name}`, { token: t, body: { selectedTools: ["ship"] } });
      expect(created.status, await created.clone().text()).toBe(201);
      return name;
    };

    // Chat: the turn waits on ship's approval (one input of two).
    const chat = await sessionFor("refused-chat");
    const user = { id: "m1", role: "user", parts: [{ type: "text", text: '/call ship {"id":1}' }] };
    const first = await call("POST", `/v1/sessions/${chat}/chat`, { token: t, body: { id: "root", messages: [user] } });
    expect(first.status).toBe(200);
    await first.text();
    const [item] = await pendingOf(chat, t);
    if (item === undefined) throw new Error("nothing pending");

    // AG-UI: the same on another session (the second input of two).
    const agui = await sessionFor("refused-agui");
    const run = {
      threadId: "root",
      runId: "r1",
      messages: [{ id: "u1", role: "user", content: '/call ship {"id":2}' }],
      tools: [],
      context: [],
    };
    const firstRun = await call("POST", `/v1/sessions/${agui}/ag-ui`, { token: t, body: run });
    expect(firstRun.status).toBe(200);
    await firstRun.text();
    const [interrupt] = await pendingOf(agui, t);
    if (interrupt === undefined) throw new Error("nothing pending");

    // Each carries an approval and a new message over the limit: 429, and the approval stays unanswered.
    const answeredChat = await call("POST", `/v1/sessions/${chat}/chat`, {
      token: t,
      body: {
        id: "root",
        messages: [
          user,
          { id: "m2", role: "user", parts: [{ type: "text", text: "one more" }] },
          {
            id: "a",
            role: "assistant",
            parts: [
              {
                type: "tool-ship",
                toolCallId: "call",
                state: "approval-responded",
                input: { id: 1 },
                approval: { id: item.id, approved: true },
              },
            ],
          },
        ],
      },
    });
    expect(answeredChat.status, await answeredChat.clone().text()).toBe(429);
    const answeredRun = await call("POST", `/v1/sessions/${agui}/ag-ui`, {
      token: t,
      body: {
        ...run,
        runId: "r2",
        messages: [...run.messages, { id: "u2", role: "user", content: "one more" }],
        resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approve: true } }],
      },
    });
    expect(answeredRun.status, await answeredRun.clone().text()).toBe(429);
    expect(await pendingOf(chat, t)).toEqual([expect.objectContaining({ id: item.id, type: "approval" })]);
    expect(await pendingOf(agui, t)).toEqual([expect.objectContaining({ id: interrupt.id, type: "approval" })]);
    expect(await toolResults(chat, t)).toBe(0);
    expect(await toolResults(agui, t)).toBe(0);

    // A request that would move a pointer, over the limit: a chat id or a thread id the page made up (its first
    // message starts its conversation), an edit on each protocol, a regeneration. Refused before anything is written:
    // no fork, no pointer, no commit at all.
    const seqs = [await lastSeq(tenant, chat), await lastSeq(tenant, agui)];
    const newChat = await call("POST", `/v1/sessions/${chat}/chat`, {
      token: t,
      body: { id: "page-new", messages: [{ id: "n1", role: "user", parts: [{ type: "text", text: "a new page" }] }] },
    });
    expect(newChat.status, await newChat.clone().text()).toBe(429);
    const newThread = await call("POST", `/v1/sessions/${agui}/ag-ui`, {
      token: t,
      body: { ...run, threadId: "thread-new", runId: "r3", messages: [{ id: "n2", role: "user", content: "new" }] },
    });
    expect(newThread.status, await newThread.clone().text()).toBe(429);
    const edit = await call("POST", `/v1/sessions/${chat}/chat`, {
      token: t,
      body: {
        id: "root",
        messages: [{ ...user, parts: [{ type: "text", text: "edited" }] }],
        trigger: "submit-message",
        messageId: "m1",
      },
    });
    expect(edit.status, await edit.clone().text()).toBe(429);
    const regenerate = await call("POST", `/v1/sessions/${chat}/chat`, {
      token: t,
      body: { id: "root", messages: [user], trigger: "regenerate-message", messageId: "a1" },
    });
    expect(regenerate.status, await regenerate.clone().text()).toBe(429);
    const editRun = await call("POST", `/v1/sessions/${agui}/ag-ui`, {
      token: t,
      body: { ...run, runId: "r4", messages: [{ id: "u1", role: "user", content: "edited" }] },
    });
    expect(editRun.status, await editRun.clone().text()).toBe(429);
    expect([await lastSeq(tenant, chat), await lastSeq(tenant, agui)]).toEqual(seqs);
    const shown = await call("GET", `/v1/sessions/${chat}/chat/page-new/messages`, { token: t });
    expect(await json(shown)).toEqual([]);

    // 422: a new message whose id names another conversation's input, carrying an approval. A tenant without
    // limits (the one above has none left): the refusal is the request key's, and the approval stays unanswered.
    const other = uniqueSession("refused-keys");
    await shipTool(other);
    const o = await token(other, "client");
    const keys = uniqueSession("refused-keys");
    expect((await call("PUT", `/v1/sessions/${keys}`, { token: o, body: { selectedTools: ["ship"] } })).status).toBe(
      201,
    );
    const post = async (path: string, payload: unknown): Promise<Response> => {
      const response = await call("POST", `/v1/sessions/${keys}/${path}`, { token: o, body: payload });
      expect(response.status, await response.clone().text()).toBe(200);
      await response.text();
      return response;
    };
    // The chat root and the AG-UI thread "desk" each wait on an approval; chat "page-x" and thread "side" each
    // accepted a message (m3, u3) on a conversation of their own.
    await post("chat", { id: "root", messages: [user] });
    await post("ag-ui", {
      ...run,
      threadId: "desk",
      messages: [{ id: "u1", role: "user", content: '/call ship {"id":2}' }],
    });
    await post("chat", { id: "page-x", messages: [{ id: "m3", role: "user", parts: [{ type: "text", text: "x" }] }] });
    await post("ag-ui", { ...run, threadId: "side", messages: [{ id: "u3", role: "user", content: "x" }] });
    const waiting = await pendingOf(keys, o);
    expect(waiting).toHaveLength(2);
    const seq = await lastSeq(other, keys);
    const approvalOf = (id: string) => ({
      id: "a",
      role: "assistant",
      parts: [
        {
          type: "tool-ship",
          toolCallId: "call",
          state: "approval-responded",
          input: { id: 1 },
          approval: { id, approved: true },
        },
      ],
    });
    // The chat's item waits in the root (conversation 1), the thread's in the conversation "desk" points at.
    const chatItem = waiting.find((item) => item.conversationId === 1);
    const runItem = waiting.find((item) => item.conversationId !== 1);
    if (chatItem === undefined || runItem === undefined) throw new Error("no approvals waiting");
    const reusedChat = await call("POST", `/v1/sessions/${keys}/chat`, {
      token: o,
      body: {
        id: "root",
        messages: [user, { id: "m3", role: "user", parts: [{ type: "text", text: "x" }] }, approvalOf(chatItem.id)],
      },
    });
    const reusedRun = await call("POST", `/v1/sessions/${keys}/ag-ui`, {
      token: o,
      body: {
        ...run,
        threadId: "desk",
        runId: "r-reused",
        messages: [
          { id: "u1", role: "user", content: '/call ship {"id":2}' },
          { id: "u3", role: "user", content: "x" },
        ],
        resume: [{ interruptId: runItem.id, status: "resolved", payload: { approve: true } }],
      },
    });
    for (const response of [reusedChat, reusedRun]) {
      expect(response.status, await response.clone().text()).toBe(422);
      expect(await json(response)).toMatchObject({ code: "idempotency_key_reused" });
    }
    expect(await pendingOf(keys, o)).toEqual(waiting);
    expect(await lastSeq(other, keys)).toBe(seq);
  });

  it("A revoked or erased user's POST chat and AG-UI streams end at once", async () => {
    const tenant = uniqueSession("revoked");
    const template = await call("PUT", "/v1/templates/slow", {
      token: await token(tenant, "operator"),
      body: { model: "echo/echo-slow" },
    });
    expect(template.status, await template.clone().text()).toBe(201);
    // Issued a few seconds ago: a revocation refuses tokens issued before its second.
    const now = Math.floor(Date.now() / 1000);
    const bob = await token(tenant, "user", { sub: "bob", iat: now - 5, exp: now + 600 });
    // A long answer: echo-slow streams it for many seconds, so both turns are live when the revocation comes.
    const long = "a long answer that keeps streaming ".repeat(60);
    /**
     * A chat stream and an AG-UI run, each in a session of its own made by `jwt` (from the slow template), read until
     * their first text: both turns are live. Answers the session names and the two open bodies.
     */
    const openStreams = async (jwt: string, label: string) => {
      const sessionFor = async (kind: string): Promise<string> => {
        const name = uniqueSession(`${label}-${kind}`);
        const created = await call("PUT", `/v1/sessions/${name}`, { token: jwt, body: { template: "slow" } });
        expect(created.status, await created.clone().text()).toBe(201);
        return name;
      };
      const chat = await sessionFor("chat");
      const agui = await sessionFor("agui");
      const chatStream = await call("POST", `/v1/sessions/${chat}/chat`, {
        token: jwt,
        body: { id: "root", messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: long }] }] },
      });
      const runStream = await call("POST", `/v1/sessions/${agui}/ag-ui`, {
        token: jwt,
        body: { threadId: "root", runId: "r1", messages: [{ id: "u1", role: "user", content: long }] },
      });
      expect([chatStream.status, runStream.status]).toEqual([200, 200]);
      if (chatStream.body === null || runStream.body === null) throw new Error("no stream");
      const chatBody = chatStream.body;
      const runBody = runStream.body;
      expect(await readUntil(chatBody, (text) => text.includes('"text-delta"'))).toContain("text-delta");
      expect(await readUntil(runBody, (text) => text.includes("TEXT_MESSAGE_CONTENT"))).toContain(
        "TEXT_MESSAGE_CONTENT",
      );
      return { chat, agui, chatBody, runBody };
    };
    const { chat, agui, chatBody, runBody } = await openStreams(bob, "revoked");

    const revoked = await call("POST", "/v1/users/bob/revoke", { token: await token(tenant, "operator") });
    expect(revoked.status).toBe(200);
    const chatRest = await readUntil(chatBody, () => false);
    const runRest = await readUntil(runBody, () => false);
    expect(chatRest).toContain("revoked");
    expect(chatRest.trim().endsWith("data: [DONE]")).toBe(true);
    expect(runRest).toContain("RUN_ERROR");
    expect(runRest).not.toContain("RUN_FINISHED");

    // The turns go on: the streams ended, not the work.
    const operator = await token(tenant, "operator");
    for (const name of [chat, agui]) {
      const snapshot = await json<{ tasks: unknown[] }>(
        await call("GET", `/v1/sessions/${name}/conversations/root`, { token: operator }),
      );
      expect(snapshot.tasks.length, name).toBeGreaterThan(0);
      await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: operator });
    }

    // Erased: carol's streams end at once too (her sessions go with her).
    const carol = await token(tenant, "user", { sub: "carol", iat: now - 5, exp: now + 600 });
    const { chatBody: carolChatBody, runBody: carolRunBody } = await openStreams(carol, "erased");
    const erased = await call("POST", "/v1/users/carol/erase", { token: operator });
    expect([200, 202], await erased.clone().text()).toContain(erased.status);
    const carolChatRest = await readUntil(carolChatBody, () => false);
    const carolRunRest = await readUntil(carolRunBody, () => false);
    expect(carolChatRest).toContain('"type":"error"');
    expect(carolChatRest.trim().endsWith("data: [DONE]")).toBe(true);
    expect(carolRunRest).toContain("RUN_ERROR");
    expect(carolRunRest).not.toContain("RUN_FINISHED");
  }, 30_000);
});
