/**
 * Subagents (§8.5) in a session Durable Object over HTTP, with the offline echo model calling the
 * `subagent` tool (`/call subagent {json}`): what `npm start` shows. A child is a conversation of the
 * session: its snapshot names its owner, the parent's names its children, its transcript and watch work
 * like any other, the operator sees the tool task in GET /tasks, and its usage is attributed to it and
 * rolls up into the session's totals. Each command (run, spawn, send, status, wait, stop) runs over a
 * real turn here. A conversation's own selectedTools select the tool, and its budgetMs is the blocking
 * budget of `run` and `wait` (§8.3): past it the call returns the child's id and the child runs on.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

interface Entry {
  readonly id: number;
  readonly kind: string;
  readonly model?: { role: string; content: unknown }[];
  readonly data?: { details?: Record<string, unknown> };
}

interface Snapshot {
  readonly conversation: { id: number; owner?: number };
  readonly owner: { taskId: number; conversationId: number } | null;
  readonly children: number[];
  readonly tasks: { id: number; kind: string }[];
}

function text(e: Entry | undefined): string {
  const content = e?.model?.[0]?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";
}

const TENANT = "subagents";

async function session(label: string, body: Record<string, unknown> = {}): Promise<{ name: string; t: string }> {
  const name = uniqueSession(label);
  const t = await token(TENANT, "client");
  const res = await call("PUT", `/v1/sessions/${name}`, {
    token: t,
    body: { selectedTools: ["echo", "subagent"], ...body },
  });
  expect(res.status).toBe(201);
  return { name, t };
}

/** Accept `/call subagent {args}` into root and wait for the turn's result; the tool result entry. */
async function subagent(
  name: string,
  t: string,
  args: Record<string, unknown>,
): Promise<{ answer: string; result: Entry }> {
  const res = await call("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=30`, {
    token: t,
    body: { input: `/call subagent ${JSON.stringify(args)}` },
  });
  expect(res.status).toBe(201);
  const accepted = await json<{ result: { status: string }; answer?: Entry }>(res);
  expect(accepted.result.status).toBe("done");
  const results = await json<{ items: Entry[] }>(
    await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result&limit=100`, { token: t }),
  );
  return { answer: text(accepted.answer), result: results.items[results.items.length - 1] as Entry };
}

async function snapshot(name: string, t: string, conversation: number | "root"): Promise<Snapshot> {
  const res = await call("GET", `/v1/sessions/${name}/conversations/${conversation}`, { token: t });
  expect(res.status).toBe(200);
  return json<Snapshot>(res);
}

describe("subagents over HTTP", () => {
  it("§8.5 run: the child answers; it is a conversation of the session with its owner, transcript, watch, task and usage", async () => {
    const { name, t } = await session("run");
    const { answer, result } = await subagent(name, t, { command: "run", prompt: "hello from the child" });
    expect(answer).toBe("hello from the child");
    expect(text(result)).toBe("hello from the child");
    const child = result.data?.details?.["id"] as number;
    // The parent names its child; the child names its owner (the tool task) and the owner's conversation.
    const root = await snapshot(name, t, "root");
    expect(root.children).toEqual([child]);
    expect(root.owner).toBeNull();
    const snap = await snapshot(name, t, child);
    expect(snap.owner).toEqual({ taskId: snap.conversation.owner, conversationId: root.conversation.id });
    expect(snap.children).toEqual([]);
    // Its transcript pages like any other.
    const entries = await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/${child}/entries`, { token: t }),
    );
    expect(entries.items.filter((e) => e.kind !== "system").map((e) => [e.kind, text(e)])).toEqual([
      ["user", "hello from the child"],
      ["assistant", "hello from the child"],
    ]);
    // Its watch opens with a view of the child.
    const controller = new AbortController();
    const watch = await call("GET", `/v1/sessions/${name}/conversations/${child}/watch`, {
      token: t,
      headers: { accept: "text/event-stream" },
    });
    expect(watch.status).toBe(200);
    const reader = (watch.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    let frames = "";
    try {
      while (!frames.includes("\n\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        frames += value;
      }
    } finally {
      controller.abort();
      await reader.cancel().catch(() => undefined);
    }
    expect(frames.startsWith("event: view")).toBe(true);
    expect(frames).toContain(`"conversationId":${child}`);
    // The operator sees the subagent tool task, which owns the child.
    const op = await token(TENANT, "operator");
    const tasks = await json<{
      items: { id: number; kind: string; owns?: number[]; state: { status: string; call?: { name: string } } }[];
    }>(await call("GET", `/v1/sessions/${name}/tasks`, { token: op }));
    const tool = tasks.items.find((task) => task.kind === "tool" && task.state.call?.name === "subagent");
    expect(tool).toMatchObject({ id: snap.conversation.owner, owns: [child], state: { status: "done" } });
    // Usage: the child's attempt is attributed to it and counted in the session's totals.
    const usage = await json<{
      totals: { attempts: number };
      rows: { items: { value: { conversationId: number; kind: string } }[] };
    }>(await call("GET", `/v1/sessions/${name}/usage`, { token: op }));
    const generations = usage.rows.items.map((row) => row.value).filter((row) => row.kind === "generation");
    expect(generations.map((row) => row.conversationId).sort()).toEqual(
      [root.conversation.id, root.conversation.id, child].sort(),
    );
    expect(usage.totals.attempts).toBe(usage.rows.items.length);
  });

  it("§8.5 spawn, status, send, wait over real turns in a Durable Object", async () => {
    const { name, t } = await session("spawn");
    const spawned = await subagent(name, t, { command: "spawn", prompt: "first job" });
    expect(spawned.answer).toMatch(/^spawned subagent \d+/);
    const child = spawned.result.data?.details?.["id"] as number;
    const waited = await subagent(name, t, { command: "wait", id: child });
    expect(waited.answer).toBe("first job");
    const status = await subagent(name, t, { command: "status", id: child });
    expect(status.answer).toContain(`subagent ${child}: idle`);
    expect(status.answer).toContain("assistant: first job");
    const sent = await subagent(name, t, { command: "send", id: child, text: "second job" });
    expect(sent.answer).toMatch(new RegExp(`^sent to subagent ${child} \\(input \\d+`));
    expect((await subagent(name, t, { command: "wait", id: child })).answer).toBe("second job");
    expect((await snapshot(name, t, "root")).children).toEqual([child]);
  });

  it("§8.5 stop aborts a spawned child's running turn (paced echo model)", async () => {
    const { name, t } = await session("stop", { model: "echo-slow" });
    const spawned = await subagent(name, t, {
      command: "spawn",
      prompt: "a long answer that streams slowly enough to be stopped ".repeat(4),
    });
    const child = spawned.result.data?.details?.["id"] as number;
    await until(
      async () => ((await snapshot(name, t, child)).tasks.length > 0 ? true : undefined),
      "the child's live generation",
    );
    const stopped = await subagent(name, t, { command: "stop", id: child });
    expect(stopped.answer).toContain(`subagent ${child}: stop requested`);
    await until(
      async () => ((await snapshot(name, t, child)).tasks.length === 0 ? true : undefined),
      "the child's turn to end",
    );
    const waited = await subagent(name, t, { command: "wait", id: child });
    expect(waited.answer).toMatch(/did not answer input \d+: aborted/);
  });

  it("§8.3 a conversation's selectedTools and budgetMs: run delegates past the budget, the child answers later, wait returns it", async () => {
    const { name, t } = await session("budget", { selectedTools: ["echo"] });
    // The session selects only echo; the root conversation's own config selects the subagent tool and
    // sets a 1 ms blocking budget (the paced model's child takes far longer than that).
    const patched = await call("PATCH", `/v1/sessions/${name}/conversations/root/config`, {
      token: t,
      body: { selectedTools: ["echo", "subagent"], budgetMs: 1, model: "echo-slow" },
    });
    expect(patched.status).toBe(200);
    const prompt = "a child answer that streams slowly past the budget";
    const { answer, result } = await subagent(name, t, { command: "run", prompt });
    const child = result.data?.details?.["id"] as number;
    expect(result.data?.details).toMatchObject({ command: "run", status: "running" });
    expect((result.data as { delegated?: number } | undefined)?.delegated).toBe(child);
    expect(text(result)).toContain(`still running as subagent ${child}; use subagent wait / status / stop`);
    expect(answer).toContain(`subagent ${child} is still working`);
    // The call is done; the child, owned by it, runs on and answers on its own.
    const root = await snapshot(name, t, "root");
    expect(root.children).toEqual([child]);
    expect(root.tasks).toEqual([]);
    await until(
      async () => {
        const entries = await json<{ items: Entry[] }>(
          await call("GET", `/v1/sessions/${name}/conversations/${child}/entries?kind=assistant`, { token: t }),
        );
        return entries.items.length === 1 && text(entries.items[0]) === prompt ? true : undefined;
      },
      "the delegated child's answer",
      1000,
    );
    // With a budget that suffices, wait returns that answer.
    expect(
      (
        await call("PATCH", `/v1/sessions/${name}/conversations/root/config`, {
          token: t,
          body: { budgetMs: 30_000, model: "echo" },
        })
      ).status,
    ).toBe(200);
    const waited = await subagent(name, t, { command: "wait", id: child });
    expect(waited.answer).toBe(prompt);
    expect(text(waited.result)).toBe(prompt);
  });

  it("Delete rejects new work in the subtree: DELETE .../conversations/{c} deletes a non-root conversation with the conversations it owns", async () => {
    const { name, t } = await session("delete");
    const forked = await call("POST", `/v1/sessions/${name}/conversations/root/fork`, {
      token: t,
      body: { at: "start" },
    });
    expect(forked.status).toBe(201);
    const parent = (await json<{ conversationId: number }>(forked)).conversationId;
    expect(
      (
        await call("PATCH", `/v1/sessions/${name}/conversations/${parent}/config`, {
          token: t,
          body: { selectedTools: ["echo", "subagent"], model: "echo" },
        })
      ).status,
    ).toBe(200);
    const ran = await call("POST", `/v1/sessions/${name}/conversations/${parent}/inputs?wait=30`, {
      token: t,
      body: { input: `/call subagent ${JSON.stringify({ command: "run", prompt: "child work" })}` },
    });
    expect(ran.status).toBe(201);
    const child = (await snapshot(name, t, parent)).children[0] as number;
    expect(child).toBeGreaterThan(parent);
    // Bad input names the field and writes nothing: a malformed id, the root, a query.
    const before = await lastSeq(TENANT, name);
    const bad = await call("DELETE", `/v1/sessions/${name}/conversations/abc`, { token: t });
    expect(bad.status).toBe(400);
    expect(await json(bad)).toMatchObject({ field: "conversation" });
    for (const root of ["root", "1"]) {
      const refused = await call("DELETE", `/v1/sessions/${name}/conversations/${root}`, { token: t });
      expect(refused.status).toBe(409);
      expect(refused.headers.get("content-type")).toContain("application/problem+json");
      expect(await json(refused)).toMatchObject({ code: "conflict", field: "conversation" });
    }
    expect((await call("DELETE", `/v1/sessions/${name}/conversations/${parent}?cascade=1`, { token: t })).status).toBe(
      400,
    );
    expect(await lastSeq(TENANT, name)).toBe(before);
    // The delete: the parent and its child in one commit.
    const deleted = await call("DELETE", `/v1/sessions/${name}/conversations/${parent}`, { token: t });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ deleted: [parent, child] });
    expect(await lastSeq(TENANT, name)).toBe(before + 2);
    // Neither exists any more, and neither accepts input.
    for (const id of [parent, child]) {
      expect((await call("GET", `/v1/sessions/${name}/conversations/${id}`, { token: t })).status).toBe(404);
      const refused = await call("POST", `/v1/sessions/${name}/conversations/${id}/inputs`, {
        token: t,
        body: { input: "more" },
      });
      expect(refused.status).toBe(404);
      expect(await json(refused)).toMatchObject({ code: "conversation_not_found", field: "conversation" });
    }
    expect((await call("DELETE", `/v1/sessions/${name}/conversations/${child}`, { token: t })).status).toBe(404);
    expect(await lastSeq(TENANT, name)).toBe(before + 2);
    expect((await snapshot(name, t, "root")).children).toEqual([]);
  });

  it("DELETE .../conversations/{c} is refused (409 busy) while its subtree runs, and writes nothing", async () => {
    const { name, t } = await session("delete-busy", { model: "echo-slow" });
    const forked = await call("POST", `/v1/sessions/${name}/conversations/root/fork`, {
      token: t,
      body: { at: "start" },
    });
    const parent = (await json<{ conversationId: number }>(forked)).conversationId;
    expect(
      (
        await call("PATCH", `/v1/sessions/${name}/conversations/${parent}/config`, {
          token: t,
          body: { selectedTools: ["echo", "subagent"], model: "echo-slow" },
        })
      ).status,
    ).toBe(200);
    const spawned = await call("POST", `/v1/sessions/${name}/conversations/${parent}/inputs?wait=30`, {
      token: t,
      body: {
        input: `/call subagent ${JSON.stringify({ command: "spawn", prompt: "a long answer that streams slowly enough to be caught running ".repeat(4) })}`,
      },
    });
    expect(spawned.status).toBe(201);
    const child = (await snapshot(name, t, parent)).children[0] as number;
    await until(
      async () => ((await snapshot(name, t, child)).tasks.length > 0 ? true : undefined),
      "the child's live generation",
    );
    // (The child streams meanwhile, so the sequence moves; that the refusal deleted nothing shows below.)
    const refused = await call("DELETE", `/v1/sessions/${name}/conversations/${parent}`, { token: t });
    expect(refused.status).toBe(409);
    expect(await json(refused)).toMatchObject({ code: "busy", field: "conversation" });
    expect((await snapshot(name, t, child)).conversation.id).toBe(child);
    expect((await snapshot(name, t, parent)).children).toEqual([child]);
    await until(
      async () => ((await snapshot(name, t, child)).tasks.length === 0 ? true : undefined),
      "the child's turn to end",
      1000,
    );
    expect((await call("DELETE", `/v1/sessions/${name}/conversations/${parent}`, { token: t })).status).toBe(200);
  });
});
