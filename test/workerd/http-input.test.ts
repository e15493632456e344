/**
 * Inputs over HTTP: idempotent accept under concurrent duplicate requests, the input and acceptance
 * reads, withdrawing a queued input, and a malformed-input table where every case is answered with its
 * 4xx naming the field and writes nothing (the session's lastSeq is the same before and after).
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, client, exists, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

describe("accept", () => {
  it("concurrent duplicate requests with one Idempotency-Key accept once and all answer the same inputId", async () => {
    const tenant = "inputs";
    const session = uniqueSession("dup");
    const api = await client(tenant);
    await api.session(session).create({});
    const root = api.session(session).conversation("root");
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => root.accept("attempt", { idempotencyKey: "order-42" })),
    );
    const ids = new Set(responses.map((r) => r.inputId));
    expect(ids.size).toBe(1);
    expect(responses.filter((r) => !r.duplicate).length).toBe(1);
    const done = await root.accept("next", { wait: 10 });
    expect(done.status).toBe("done");
    const entries = await root.entries({ limit: 100 });
    const users = entries.items.filter((e) => e.kind === "user");
    expect(users.length).toBe(2);
    expect((await api.session(session).acceptance("order-42")).inputId).toBe(responses[0]?.inputId);
  });

  it("The input result carries the answer's text", async () => {
    const tenant = "inputs";
    const session = uniqueSession("output");
    const jwt = await token(tenant, "client");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: jwt, body: {} })).status).toBe(201);
    const inputs = `/v1/sessions/${session}/conversations/root/inputs`;
    const waited = await json<{ inputId: number; status: string; outputText?: string; result: { answer?: number } }>(
      await call("POST", `${inputs}?wait=10`, { token: jwt, body: { input: "say something back" } }),
    );
    expect(waited.status).toBe("done");
    // The text parts of the final answer entry, as the transcript holds them.
    const page = await json<{
      items: { id: number; model?: { role: string; content: { type: string; text?: string }[] }[] }[];
    }>(
      await call(
        "GET",
        `/v1/sessions/${session}/conversations/root/entries?after=${(waited.result.answer ?? 1) - 1}&limit=1`,
        {
          token: jwt,
        },
      ),
    );
    const text = (page.items[0]?.model ?? [])
      .filter((m) => m.role === "assistant")
      .flatMap((m) => m.content.filter((b) => b.type === "text").map((b) => b.text ?? ""))
      .join("");
    expect(text.length).toBeGreaterThan(0);
    expect(waited.outputText).toBe(text);
    // One request is enough later too: GET /inputs/{id} carries it.
    const read = await json<{ outputText?: string }>(
      await call("GET", `/v1/sessions/${session}/inputs/${waited.inputId}`, { token: jwt }),
    );
    expect(read.outputText).toBe(text);
    // Absent while the input is not done: a queued (nextRun) input has no answer yet.
    const queued = await json<Record<string, unknown>>(
      await call("POST", inputs, { token: jwt, body: { input: "later", mode: "nextRun" } }),
    );
    expect(queued["status"]).toBe("queued");
    expect(queued).not.toHaveProperty("outputText");
    const queuedRead = await json<Record<string, unknown>>(
      await call("GET", `/v1/sessions/${session}/inputs/${String(queued["inputId"])}`, { token: jwt }),
    );
    expect(queuedRead).not.toHaveProperty("outputText");
  });

  it("a queued input can be read and withdrawn once; unknown inputs are 404", async () => {
    const tenant = "inputs";
    const session = uniqueSession("withdraw");
    const api = await client(tenant);
    await api.session(session).create({});
    const s = api.session(session);
    const queued = await s.conversation("root").accept("later", { mode: "nextRun" });
    expect(queued.status).toBe("queued");
    expect((await s.input(queued.inputId)).result.status).toBe("queued");
    const withdrawn = await s.withdraw(queued.inputId);
    expect(withdrawn.result).toMatchObject({ status: "unanswered", reason: "aborted" });
    const seq = await lastSeq(tenant, session);
    await expect(s.withdraw(queued.inputId)).rejects.toMatchObject({ status: 409, code: "input_not_queued" });
    await expect(s.input(999_999)).rejects.toMatchObject({ status: 404, code: "input_not_found" });
    await expect(s.acceptance("never-used")).rejects.toMatchObject({ status: 404, code: "acceptance_not_found" });
    expect(await lastSeq(tenant, session)).toBe(seq);
  });

  it("whenBusy reject on a busy conversation is 409 and writes nothing", async () => {
    const tenant = "inputs";
    const session = uniqueSession("busy");
    const api = await client(tenant);
    await api.session(session).create({ model: "echo-slow" });
    const root = api.session(session).conversation("root");
    // echo-slow keeps the first turn live for about a second.
    const first = await root.accept("a first input that the paced echo model takes a while to stream back");
    expect(first.status).toBe("placed");
    const seq = await lastSeq(tenant, session);
    await expect(root.accept("second", { whenBusy: "reject" })).rejects.toMatchObject({
      status: 409,
      code: "conflict",
    });
    const after = await lastSeq(tenant, session);
    // Only the live turn's own commits (scratch frames) may have landed meanwhile; no input was written.
    const snapshot = await root.snapshot();
    expect(snapshot.inbox).toEqual([]);
    expect(after).toBeGreaterThanOrEqual(seq);
    const done = await root.accept("third", { wait: 20 });
    expect(done.status).toBe("done");
    const users = (await root.entries({ limit: 100 })).items.filter((e) => e.kind === "user");
    expect(JSON.stringify(users)).not.toContain("second");
  });
});

interface Case {
  readonly name: string;
  readonly method: string;
  readonly path: (session: string) => string;
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
  readonly status: number;
  readonly code: string;
  readonly field?: string;
}

const s = (x: string): string => `/v1/sessions/${x}`;
const root = (x: string): string => `${s(x)}/conversations/root`;
const huge = "x".repeat(1_100_000);

const CASES: readonly Case[] = [
  // wrong types and unknown fields
  {
    name: "PUT model not a string",
    method: "PUT",
    path: s,
    body: { model: 5 },
    status: 400,
    code: "invalid_body",
    field: "model",
  },
  {
    name: "PUT unknown field",
    method: "PUT",
    path: s,
    body: { colour: "red" },
    status: 400,
    code: "invalid_body",
    field: "colour",
  },
  {
    name: "PUT selectedTools not an array",
    method: "PUT",
    path: s,
    body: { selectedTools: "echo" },
    status: 400,
    code: "invalid_body",
    field: "selectedTools",
  },
  {
    name: "PUT onInterrupt not a policy",
    method: "PUT",
    path: s,
    body: { onInterrupt: "later" },
    status: 400,
    code: "invalid_body",
    field: "onInterrupt",
  },
  {
    name: "PUT unknown model",
    method: "PUT",
    path: s,
    body: { model: "no-such-model" },
    status: 409,
    code: "session_config_conflict",
  },
  {
    name: "accept input a number",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: 5 },
    status: 400,
    code: "invalid_body",
    field: "input",
  },
  {
    name: "accept without input",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: {},
    status: 400,
    code: "invalid_body",
    field: "input",
  },
  {
    name: "accept empty input",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "" },
    status: 400,
    code: "invalid_body",
    field: "input",
  },
  {
    name: "accept unknown field",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "x", priority: 1 },
    status: 400,
    code: "invalid_body",
    field: "priority",
  },
  {
    name: "accept bad mode",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "x", mode: "now" },
    status: 400,
    code: "invalid_body",
    field: "mode",
  },
  {
    name: "accept mode with whenBusy",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "x", mode: "steer", whenBusy: "steer" },
    status: 400,
    code: "invalid_body",
    field: "whenBusy",
  },
  {
    name: "accept bad content block",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: [{ type: "video", url: "x" }] },
    status: 400,
    code: "invalid_body",
    field: "input",
  },
  {
    name: "accept image without mimeType",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: [{ type: "image", data: "AAAA" }] },
    status: 400,
    code: "invalid_body",
    field: "input",
  },
  {
    name: "accept body not JSON",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    rawBody: "{input:",
    headers: { "content-type": "application/json" },
    status: 400,
    code: "invalid_json",
  },
  {
    name: "accept body not JSON content type",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    rawBody: "input=x",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    status: 415,
    code: "unsupported_media_type",
    field: "content-type",
  },
  {
    name: "accept JSON array body",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: ["x"],
    status: 400,
    code: "invalid_body",
  },
  // huge bodies
  {
    name: "accept huge body",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: huge },
    status: 413,
    code: "payload_too_large",
  },
  { name: "PUT huge body", method: "PUT", path: s, body: { model: huge }, status: 413, code: "payload_too_large" },
  {
    name: "PATCH config huge body",
    method: "PATCH",
    path: (x) => `${root(x)}/config`,
    body: { profile: huge },
    status: 413,
    code: "payload_too_large",
  },
  // headers and query
  {
    name: "Idempotency-Key with a space",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "x" },
    headers: { "idempotency-key": "a b" },
    status: 400,
    code: "invalid_header",
    field: "idempotency-key",
  },
  {
    name: "Idempotency-Key too long",
    method: "POST",
    path: (x) => `${root(x)}/inputs`,
    body: { input: "x" },
    headers: { "idempotency-key": "k".repeat(201) },
    status: 400,
    code: "invalid_header",
    field: "idempotency-key",
  },
  {
    name: "wait not a number",
    method: "POST",
    path: (x) => `${root(x)}/inputs?wait=soon`,
    body: { input: "x" },
    status: 400,
    code: "invalid_query",
    field: "wait",
  },
  {
    name: "wait too long",
    method: "POST",
    path: (x) => `${root(x)}/inputs?wait=600`,
    body: { input: "x" },
    status: 400,
    code: "invalid_query",
    field: "wait",
  },
  {
    name: "unknown query parameter",
    method: "POST",
    path: (x) => `${root(x)}/inputs?fast=1`,
    body: { input: "x" },
    status: 400,
    code: "invalid_query",
    field: "fast",
  },
  {
    name: "repeated query parameter",
    method: "GET",
    path: (x) => `${root(x)}/entries?limit=1&limit=2`,
    status: 400,
    code: "invalid_query",
    field: "limit",
  },
  // bad ids
  {
    name: "conversation not an id",
    method: "GET",
    path: (x) => `${s(x)}/conversations/abc`,
    status: 400,
    code: "invalid_id",
    field: "conversation",
  },
  {
    name: "conversation 0",
    method: "POST",
    path: (x) => `${s(x)}/conversations/0/inputs`,
    body: { input: "x" },
    status: 400,
    code: "invalid_id",
    field: "conversation",
  },
  {
    name: "conversation negative",
    method: "GET",
    path: (x) => `${s(x)}/conversations/-1/entries`,
    status: 400,
    code: "invalid_id",
    field: "conversation",
  },
  {
    name: "conversation fractional",
    method: "GET",
    path: (x) => `${s(x)}/conversations/1.5`,
    status: 400,
    code: "invalid_id",
    field: "conversation",
  },
  {
    name: "conversation too large",
    method: "GET",
    path: (x) => `${s(x)}/conversations/99999999999999999`,
    status: 400,
    code: "invalid_id",
    field: "conversation",
  },
  {
    name: "conversation that does not exist",
    method: "POST",
    path: (x) => `${s(x)}/conversations/999999/inputs`,
    body: { input: "x" },
    status: 404,
    code: "conversation_not_found",
  },
  {
    name: "input id not a number",
    method: "GET",
    path: (x) => `${s(x)}/inputs/first`,
    status: 400,
    code: "invalid_id",
    field: "inputId",
  },
  {
    name: "task id 0",
    method: "POST",
    path: (x) => `${s(x)}/tasks/0/abort`,
    status: 400,
    code: "invalid_id",
    field: "taskId",
  },
  {
    name: "task that does not exist",
    method: "POST",
    path: (x) => `${s(x)}/tasks/999999/abort`,
    status: 404,
    code: "task_not_found",
  },
  {
    name: "acceptance key with a space",
    method: "GET",
    path: (x) => `${s(x)}/acceptances/a%20b`,
    status: 400,
    code: "invalid_id",
    field: "requestKey",
  },
  {
    name: "fork at a missing entry",
    method: "POST",
    path: (x) => `${root(x)}/fork`,
    body: { at: 999999 },
    status: 404,
    code: "entry_not_found",
    field: "at",
  },
  {
    name: "fork at not an id",
    method: "POST",
    path: (x) => `${root(x)}/fork`,
    body: { at: "yesterday" },
    status: 400,
    code: "invalid_body",
    field: "at",
  },
  {
    name: "fork without at",
    method: "POST",
    path: (x) => `${root(x)}/fork`,
    body: { abort: true },
    status: 400,
    code: "invalid_body",
    field: "at",
  },
  {
    name: "PATCH config empty",
    method: "PATCH",
    path: (x) => `${root(x)}/config`,
    body: {},
    status: 400,
    code: "invalid_body",
  },
  {
    name: "PATCH config unknown model",
    method: "PATCH",
    path: (x) => `${root(x)}/config`,
    body: { model: "gpt-0" },
    status: 422,
    code: "unknown_model",
    field: "model",
  },
  {
    name: "PATCH config unknown tool",
    method: "PATCH",
    path: (x) => `${root(x)}/config`,
    body: { selectedTools: ["shell"] },
    status: 422,
    code: "unknown_tool",
    field: "selectedTools.0",
  },
  {
    name: "PATCH config budget not an integer",
    method: "PATCH",
    path: (x) => `${root(x)}/config`,
    body: { budgetMs: 1.5 },
    status: 400,
    code: "invalid_body",
    field: "budgetMs",
  },
  {
    name: "abort with an unknown body field",
    method: "POST",
    path: (x) => `${root(x)}/abort`,
    body: { force: true },
    status: 400,
    code: "invalid_body",
    field: "force",
  },
  // bad cursors
  {
    name: "entries before not a number",
    method: "GET",
    path: (x) => `${root(x)}/entries?before=latest`,
    status: 400,
    code: "invalid_query",
    field: "before",
  },
  {
    name: "entries after negative",
    method: "GET",
    path: (x) => `${root(x)}/entries?after=-5`,
    status: 400,
    code: "invalid_query",
    field: "after",
  },
  {
    name: "entries limit 0",
    method: "GET",
    path: (x) => `${root(x)}/entries?limit=0`,
    status: 400,
    code: "invalid_query",
    field: "limit",
  },
  {
    name: "entries limit too large",
    method: "GET",
    path: (x) => `${root(x)}/entries?limit=5000`,
    status: 400,
    code: "invalid_query",
    field: "limit",
  },
  {
    name: "entries after not below before",
    method: "GET",
    path: (x) => `${root(x)}/entries?after=9&before=3`,
    status: 400,
    code: "invalid_cursor",
    field: "after",
  },
  {
    name: "tasks live not a boolean",
    method: "GET",
    path: (x) => `${s(x)}/tasks?live=yes`,
    status: 400,
    code: "invalid_query",
    field: "live",
  },
  {
    name: "watch Last-Event-ID garbage",
    method: "GET",
    path: (x) => `${root(x)}/watch`,
    headers: { "last-event-id": "abc" },
    status: 400,
    code: "invalid_cursor",
    field: "last-event-id",
  },
  { name: "unknown route", method: "GET", path: (x) => `${s(x)}/nothing-here`, status: 404, code: "route_not_found" },
];

describe("malformed input", () => {
  it("every malformed request gets its 4xx naming the field and writes nothing", async () => {
    const tenant = "malformed";
    const session = uniqueSession("table");
    const api = await client(tenant);
    await api.session(session).create({});
    await api.session(session).conversation("root").accept("seed", { wait: 10 });
    const jwt = await token(tenant, "operator");
    const before = await lastSeq(tenant, session);
    const failures: string[] = [];
    for (const c of CASES) {
      const response = await call(c.method, c.path(session), {
        token: jwt,
        ...(c.body === undefined ? {} : { body: c.body }),
        ...(c.rawBody === undefined ? {} : { rawBody: c.rawBody }),
        ...(c.headers === undefined ? {} : { headers: c.headers }),
      });
      const body = await json(response);
      const problem = response.headers.get("content-type") === "application/problem+json";
      if (
        response.status !== c.status ||
        body["code"] !== c.code ||
        (c.field !== undefined && body["field"] !== c.field) ||
        !problem ||
        typeof body["detail"] !== "string"
      ) {
        failures.push(`${c.name}: ${response.status} ${JSON.stringify(body)}`);
      }
      const after = await lastSeq(tenant, session);
      if (after !== before) failures.push(`${c.name}: wrote (lastSeq ${before} -> ${after})`);
    }
    expect(failures).toEqual([]);
  });

  it("an invalid session name is 400 and a PUT with an unknown model creates nothing", async () => {
    const api = await token("malformed", "client");
    for (const name of ["bad%20name", "-leading-dash", "x".repeat(129), "semi%3Acolon"]) {
      const response = await call("GET", `/v1/sessions/${name}`, { token: api });
      expect(response.status, name).toBe(400);
      expect((await json(response))["field"]).toBe("session");
    }
    const session = uniqueSession("unknown-model");
    const response = await call("PUT", `/v1/sessions/${session}`, { token: api, body: { model: "no-such-model" } });
    expect(response.status).toBe(422);
    expect(await json(response)).toMatchObject({ code: "unknown_model", field: "model" });
    expect(await exists("malformed", session)).toBe(false);
  });
});
