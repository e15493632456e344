/**
 * Structured logs (docs/operations.md "Logs"): one JSON line per request (request id, tenant, session, conversation,
 * route, status, duration) and per task invocation (task, kind, method, outcome, duration), never a
 * token, a query string or input text.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { log, setLogLevel, setLogSink } from "../../src/worker/log.js";
import { client, token, uniqueSession, until, watchToken, call } from "./http-fixtures.js";

afterEach(async () => {
  setLogSink(undefined);
  await abortAllDurableObjects();
});

describe("logs", () => {
  it("one JSON line per request and per task invocation, without tokens or input text", async () => {
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    const tenant = "logs";
    const session = uniqueSession("logs");
    const api = await client(tenant);
    await api.session(session).create({});
    const secret = "a secret sentence the user typed";
    await api.session(session).conversation("root").accept(secret, { wait: 10 });
    const jwt = await token(tenant, "client");
    const watch = await watchToken(tenant, session, "root");
    const stream = await call("GET", `/v1/sessions/${session}/conversations/root/watch?access_token=${watch}`);
    await stream.body?.cancel();
    const parsed = await until(async () => {
      const all = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      return all.some((l) => l["type"] === "task" && l["kind"] === "generation") ? all : undefined;
    }, "a task line");
    const requests = parsed.filter((l) => l["type"] === "request");
    expect(requests.find((l) => l["method"] === "POST" && String(l["route"]).endsWith("/inputs"))).toMatchObject({
      tenant,
      session,
      conversation: "root",
      status: 201,
      route: "/v1/sessions/:session/conversations/:conversation/inputs",
    });
    for (const l of requests) expect(typeof l["requestId"]).toBe("string");
    expect(parsed.find((l) => l["type"] === "task" && l["kind"] === "generation")).toMatchObject({
      method: "execute",
      tenant,
      session,
    });
    const text = lines.join("\n");
    for (const forbidden of [secret, jwt, watch, "access_token"]) expect(text).not.toContain(forbidden);
  });

  it("one task line per task invocation: tenant, session, conversation, task, kind, method, the task's final status and duration", async () => {
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    const tenant = "logs";
    const session = uniqueSession("task-lines");
    const api = await client(tenant);
    await api.session(session).create({});
    const rootId = (await api.session(session).get()).rootConversationId;
    const secret = "another sentence nobody may log";
    const accepted = await api.session(session).conversation("root").accept(secret, { wait: 10 });
    expect(accepted.status).toBe("done");
    const tasks = (await (await client(tenant, "operator")).session(session).tasks({ limit: 100 })).items;
    const generation = tasks.find((task) => task.kind === "generation");
    if (generation === undefined) throw new Error("no generation task");
    const line = await until(async () => {
      const found = lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l["type"] === "task" && l["taskId"] === generation.id);
      return found.length > 0 ? found[found.length - 1] : undefined;
    }, "the generation's task line");
    expect(line).toEqual({
      type: "task",
      tenant,
      session,
      conversation: rootId,
      taskId: generation.id,
      kind: "generation",
      method: "execute",
      outcome: generation.state.status,
      durationMs: expect.any(Number),
    });
    expect(generation.role).toBe("terminal");
    // Every task the turn ran has its line, none without tenant and session, and no input text.
    const taskLines = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l["type"] === "task" && l["session"] === session);
    for (const task of tasks)
      expect(
        taskLines.some((l) => l["taskId"] === task.id),
        `task ${task.id} (${task.kind})`,
      ).toBe(true);
    expect(lines.join("\n")).not.toContain(secret);
  });

  it("LOG_LEVEL quiet writes no line to the console, info writes each; a capturing sink sees them all", () => {
    const written: unknown[] = [];
    const spy = vi.spyOn(console, "log").mockImplementation((line: unknown) => void written.push(line));
    try {
      setLogSink(undefined);
      const line = {
        type: "task",
        conversation: 1,
        taskId: 1,
        kind: "generation",
        method: "execute",
        outcome: "done",
        durationMs: 1,
      } as const;
      setLogLevel("quiet");
      log(line);
      expect(written).toEqual([]);
      setLogLevel("info");
      log(line);
      expect(written).toEqual([JSON.stringify(line)]);
      const captured: string[] = [];
      setLogSink((l) => captured.push(l));
      setLogLevel("quiet");
      log(line);
      expect(captured).toEqual([JSON.stringify(line)]);
    } finally {
      spy.mockRestore();
      setLogLevel(env.LOG_LEVEL);
    }
  });
});
