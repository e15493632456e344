/**
 * Export and import of a session (docs/operations.md "Export and import"): GET .../export streams a header line
 * and the §7.3 batches rebuilt from SQLite with their ids kept; the core's JSONL backend (§7.4) opens them once
 * the header is removed; POST .../import stages an export into a new session and links it only when every line
 * validated, and a bad line is refused by number, leaving nothing behind.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { JsonlStorage } from "../../src/storage/jsonl.js";
import { MemoryFiles } from "../../src/storage/files.js";
import type { Entry } from "../../src/storage/records.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, client, exists, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";
import { resetSeams } from "./session-fixtures.js";
import { UserExportRedactor, WITHHELD } from "../../src/worker/session/user-export.js";
import { defineTool, PRODUCT, ProductEndpoint } from "./tool-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TENANT = "export";

async function exported(session: string, jwt?: string): Promise<{ status: number; type: string | null; text: string }> {
  const response = await call("GET", `/v1/sessions/${session}/export`, {
    token: jwt ?? (await token(TENANT, "operator")),
  });
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    text: new TextDecoder().decode(await response.arrayBuffer()),
  };
}

async function imported(session: string, body: string): Promise<Response> {
  return call("POST", `/v1/sessions/${session}/import`, {
    token: await token(TENANT, "operator"),
    rawBody: body,
    headers: { "content-type": "application/jsonl" },
  });
}

function lines(text: string): string[] {
  expect(text.endsWith("\n")).toBe(true);
  return text.slice(0, -1).split("\n");
}

/** A session with a title, labels, metadata and two answered turns. */
async function answeredSession(label: string): Promise<string> {
  const api = await client(TENANT, "operator");
  const name = uniqueSession(label);
  const session = api.session(name);
  await session.create({ title: "Exported", labels: ["billing"], metadata: { plan: "pro" } });
  const root = session.conversation("root");
  expect((await root.accept("first question", { wait: 10 })).status).toBe("done");
  expect((await root.accept("second question", { wait: 10 })).status).toBe("done");
  return name;
}

describe("Export and import", () => {
  it("Export then import reproduces the session", async () => {
    const source = await answeredSession("export-source");
    const first = await exported(source);
    expect(first.status).toBe(200);
    expect(first.type).toBe("application/jsonl");
    const [headerLine, ...batches] = lines(first.text);
    const header = JSON.parse(headerLine ?? "") as Record<string, unknown>;
    expect(header).toMatchObject({
      format: "pico-edge.session-export",
      version: 1,
      session: source,
      redacted: false,
      title: "Exported",
      labels: ["billing"],
      metadata: { plan: "pro" },
      lastSeq: await lastSeq(TENANT, source),
    });
    expect(batches.length).toBeGreaterThan(0);

    const copy = uniqueSession("export-copy");
    const response = await imported(copy, first.text);
    expect(response.status).toBe(201);
    const answer = await json<{ incarnation: string; lastSeq: number; aborted: number[]; paused: number[] }>(response);
    expect(answer).toMatchObject({ lastSeq: header["lastSeq"], aborted: [], paused: [] });
    expect(answer.incarnation).not.toBe(header["incarnation"]);

    // The copy answers as the source does: same transcript, same ids, listed in the directory with its labels.
    const api = await client(TENANT, "operator");
    const sourceEntries = await api.session(source).conversation("root").entries({ limit: 100 });
    const copyEntries = await api.session(copy).conversation("root").entries({ limit: 100 });
    expect(copyEntries.items).toEqual(sourceEntries.items);
    expect(copyEntries.items.map((e: Entry) => e.kind)).toContain("assistant");
    const listed = await api.sessions({ metadata: { plan: "pro" } });
    expect(listed.items.map((item) => item.session)).toContain(copy);

    // Export again: the same bytes apart from the new session's identity (its name and incarnation).
    const again = await exported(copy);
    const [againHeader, ...againBatches] = lines(again.text);
    const renamed = { ...header, session: copy, incarnation: answer.incarnation };
    expect(JSON.parse(againHeader ?? "")).toEqual(renamed);
    expect(againBatches.join("\n")).toBe(
      batches.join("\n").replaceAll(JSON.stringify(header["incarnation"]), JSON.stringify(answer.incarnation)),
    );

    // The copy is a working session: a new turn is answered after the imported ids.
    const next = await api.session(copy).conversation("root").accept("third question", { wait: 10 });
    expect(next.status).toBe("done");
    expect(await lastSeq(TENANT, copy)).toBeGreaterThan(answer.lastSeq);
  });

  it("The core's JSONL backend opens the exported file once the header line is removed", async () => {
    const source = await answeredSession("export-jsonl");
    const [, ...batches] = lines((await exported(source)).text);
    const files = new MemoryFiles();
    files.setRaw("session.jsonl", `${batches.join("\n")}\n`);
    const storage = await JsonlStorage.open(files);
    expect(storage.lastSeq).toBe(await lastSeq(TENANT, source));
    const api = await client(TENANT, "operator");
    const served = await api.session(source).conversation("root").entries({ limit: 100 });
    const root = served.items[0]?.conversationId ?? 0;
    const page = await storage.scanEntries({ conversationId: root, limit: 100 });
    expect(page.items.map((e) => [e.id, e.kind])).toEqual(served.items.map((e: Entry) => [e.id, e.kind]));
    expect((await storage.scanTasks({ live: true, limit: 10 })).items).toEqual([]);
    await storage.close();
  });

  it("A bad import line is refused with its number and writes nothing", async () => {
    const source = await answeredSession("export-bad");
    const all = lines((await exported(source)).text);
    // Any split of the batches is an export too: line 2 holds the first half, line 3 the rest, and line 3's
    // first write deletes a conversation that never existed (line 2 commits before it is refused).
    const whole = JSON.parse(all[1] ?? "") as { first: number; writes: Record<string, unknown>[] };
    const half = Math.floor(whole.writes.length / 2);
    const second = { first: whole.first + half, writes: whole.writes.slice(half) };
    second.writes[0] = { type: "deleteConversation", id: 999_999 };
    const split = [JSON.stringify({ first: whole.first, writes: whole.writes.slice(0, half) }), JSON.stringify(second)];
    const body = [all[0], ...split, ...all.slice(2)].join("\n") + "\n";
    const copy = uniqueSession("export-bad-copy");
    const response = await imported(copy, body);
    expect(response.status).toBe(422);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
    const problem = await json(response);
    expect(problem).toMatchObject({ code: "invalid_import", line: 3 });
    expect(String(problem["detail"])).toContain("line 3");
    // Nothing left behind: no session, no directory row; the same name imports cleanly afterwards.
    expect(await exists(TENANT, copy)).toBe(false);
    const api = await client(TENANT, "operator");
    expect((await api.sessions({})).items.map((item) => item.session)).not.toContain(copy);
    expect(await lastSeq(TENANT, copy)).toBe(0);

    // Not JSON, and a header of another format, are refused by line too.
    const notJson = await imported(copy, `${all[0]}\n{oops\n`);
    expect(await json(notJson)).toMatchObject({ code: "invalid_import", line: 2 });
    const header = await imported(copy, `{"format":"other"}\n`);
    expect(await json(header)).toMatchObject({ code: "invalid_import", line: 1 });
    expect(await exists(TENANT, copy)).toBe(false);
    expect((await imported(copy, all.join("\n") + "\n")).status).toBe(201);
  });

  it("Live work is imported settled: a running turn is aborted and a schedule comes back paused", async () => {
    const api = await client(TENANT, "operator");
    const source = uniqueSession("export-live");
    const s = api.session(source);
    await s.create({ model: "echo-slow" });
    const scheduled = await call("POST", `/v1/sessions/${source}/schedules`, {
      token: await token(TENANT, "operator"),
      body: { input: "tick", every: 3_600_000 },
    });
    expect(scheduled.status).toBe(201);
    const schedule = (await json<{ id: number }>(scheduled)).id;
    const accepted = await s
      .conversation("root")
      .accept("a long answer that the paced echo model streams slowly, long enough to be exported while running");
    expect(accepted.status).toBe("placed");
    const text = (await exported(source)).text;

    const copy = uniqueSession("export-live-copy");
    const response = await imported(copy, text);
    expect(response.status).toBe(201);
    const answer = await json<{ aborted: number[]; paused: number[] }>(response);
    expect(answer.paused).toEqual([schedule]);
    expect(answer.aborted.length).toBeGreaterThan(0);
    expect(answer.aborted).not.toContain(schedule);
    // The copy's turn ends aborted, not answered: its model is never called again.
    const result = await until(async () => {
      const r = (await api.session(copy).input(accepted.inputId)).result;
      return r.status === "queued" || r.status === "placed" ? undefined : r;
    }, "the imported input's result");
    expect(result).toMatchObject({ status: "unanswered", reason: "aborted" });
    const schedules = await call("GET", `/v1/sessions/${copy}/schedules`, { token: await token(TENANT, "operator") });
    expect(await json(schedules)).toMatchObject({ items: [{ id: schedule, status: "paused", nextRunAt: null }] });
    // The source runs on untouched.
    const original = await until(async () => {
      const r = (await s.input(accepted.inputId)).result;
      return r.status === "done" ? r : undefined;
    }, "the source's answer");
    expect(original.status).toBe("done");
  });

  it("Each task an import aborts carries the abort reason imported", async () => {
    const api = await client(TENANT, "operator");
    const source = uniqueSession("export-reason");
    const s = api.session(source);
    await s.create({ model: "echo-slow" });
    const accepted = await s
      .conversation("root")
      .accept("a long answer that the paced echo model streams slowly, long enough to be exported while running");
    expect(accepted.status).toBe("placed");
    const text = (await exported(source)).text;
    const copy = uniqueSession("export-reason-copy");
    const response = await imported(copy, text);
    expect(response.status).toBe(201);
    const answer = await json<{ aborted: number[] }>(response);
    expect(answer.aborted.length).toBeGreaterThan(0);
    await until(async () => {
      const r = (await api.session(copy).input(accepted.inputId)).result;
      return r.status === "queued" || r.status === "placed" ? undefined : r;
    }, "the imported input's result");

    // Settled by their abort handlers, each aborted task says why: the import, not an operator or a user.
    const operator = await token(TENANT, "operator");
    const listed = await call("GET", `/v1/sessions/${copy}/tasks?conversation=root&limit=100`, { token: operator });
    expect(listed.status).toBe(200);
    const tasks = (await json<{ items: { id: number; role: string; abort?: true; abortReason?: string }[] }>(listed))
      .items;
    for (const id of answer.aborted) {
      expect(tasks.find((t) => t.id === id)).toMatchObject({
        id,
        role: "terminal",
        abort: true,
        abortReason: "imported",
      });
    }
    // Tasks the import did not abort carry no reason; nor does the source's own task list.
    for (const task of tasks.filter((t) => !answer.aborted.includes(t.id))) expect(task.abortReason).toBeUndefined();
    const original = await call("GET", `/v1/sessions/${source}/tasks?conversation=root&limit=100`, { token: operator });
    for (const task of (await json<{ items: { abortReason?: string }[] }>(original)).items)
      expect(task.abortReason).toBeUndefined();

    // A task aborted by an operator on the copy afterwards has no import reason.
    const next = await api.session(copy).conversation("root").accept("another slow answer to abort by hand");
    expect(next.status).toBe("placed");
    const live = await call("GET", `/v1/sessions/${copy}/tasks?live=true`, { token: operator });
    const running = (await json<{ items: { id: number }[] }>(live)).items[0];
    expect(running).toBeDefined();
    const aborted = await call("POST", `/v1/sessions/${copy}/tasks/${running!.id}/abort`, { token: operator });
    expect(aborted.status).toBe(200);
    expect((await json<{ abort?: true; abortReason?: string }>(aborted)).abortReason).toBeUndefined();
  });

  it("A user exports their own session redacted, and a redacted export is not importable", async () => {
    const source = await answeredSession("export-user");
    const user = await token(TENANT, "user", { sub: "reader", sessions: [source], act: ["read"] });
    const mine = await exported(source, user);
    expect(mine.status).toBe(200);
    const [headerLine] = lines(mine.text);
    expect(JSON.parse(headerLine ?? "")).toMatchObject({ session: source, redacted: true });
    const other = await token(TENANT, "user", { sub: "stranger", sessions: ["someone-else"], act: ["read"] });
    expect((await exported(source, other)).status).toBe(404);
    const response = await imported(uniqueSession("export-user-copy"), mine.text);
    expect(await json(response)).toMatchObject({ code: "invalid_import", line: 1 });
  });

  it("A user's export holds no remote error text: an operator's export does", async () => {
    const tenant = `export-remote-${Date.now().toString(36)}`;
    const secretText = "ledger row 4471 locked by nightly-reconcile on db-7.internal";
    const endpoint = new ProductEndpoint(tenant).reply("ledger", () => ({
      status: 422,
      body: { error: secretText },
    }));
    setHostSeams({ fetch: endpoint.fetch });
    try {
      await defineTool(tenant, "ledger");
      const operator = await token(tenant, "operator");
      const name = uniqueSession("export-remote");
      const created = await call("PUT", `/v1/sessions/${name}`, {
        token: operator,
        body: { selectedTools: ["ledger"] },
      });
      expect(created.status).toBe(201);
      const accepted = await call("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=10`, {
        token: operator,
        body: { input: '/call ledger {"id":1}' },
      });
      expect(await json(accepted)).toMatchObject({ status: "done" });
      expect(endpoint.seen("ledger")).toHaveLength(1);

      // The operator's export holds the server's text (in the remote call's outcome and the tool result).
      const whole = await exported(name, operator);
      expect(whole.status).toBe(200);
      expect(whole.text).toContain(secretText);
      expect(whole.text).toContain(PRODUCT);

      // The user's holds neither it nor the tool's URL; the failure itself, and the tool's name, stay.
      const user = await token(tenant, "user", { sub: "reader", sessions: [name], act: ["read"] });
      const mine = await exported(name, user);
      expect(mine.status).toBe(200);
      expect(mine.text).not.toContain(PRODUCT);
      const [, ...batches] = lines(mine.text);
      const writes = batches.flatMap((line) => (JSON.parse(line) as { writes: Record<string, unknown>[] }).writes);
      // The echo model answers with the tool result's text it was given: that answer is the model's own text, shown
      // to the user as the turn's answer anyway. Everything else of the export holds none of the server's words.
      const answers = writes.filter(
        (w) => w["type"] === "entry" && (w["entry"] as { kind: string }).kind === "assistant",
      );
      expect(JSON.stringify(answers)).toContain("4471");
      const rest = JSON.stringify(writes.filter((w) => !answers.includes(w)));
      expect(rest).not.toContain("4471");
      expect(rest).not.toContain("nightly-reconcile");
      expect(rest).toContain('"ledger"');
      const result = writes.find(
        (w) => w["type"] === "entry" && (w["entry"] as { kind: string }).kind === "tool_result",
      ) as { entry: { data: Record<string, unknown>; model: { content: { text: string }[]; isError: boolean }[] } };
      expect(result.entry.data).toMatchObject({
        isError: true,
        details: { error: "http_status", http: { status: 422 } },
      });
      expect(result.entry.model[0]).toMatchObject({ isError: true });
      expect(result.entry.model[0]!.content[0]!.text).toContain('tool "ledger" failed (http_status, HTTP 422)');
      const remote = writes.find(
        (w) => w["type"] === "task" && (w["task"] as { kind: string }).kind === "remote_call",
      ) as { task: { state: { status: string; outcome: Record<string, unknown> } } } | undefined;
      expect(remote?.task.state).toMatchObject({ status: "settled", outcome: { type: "error", code: "http_status" } });
      // The line count and sequence numbers are the operator's: only texts change.
      expect(lines(mine.text).length).toBe(lines(whole.text).length);
    } finally {
      resetSeams();
    }
  });

  it("a user's export withholds a late remote call's error in its notice, and keeps an answered call's output", () => {
    const redactor = new UserExportRedactor();
    const notice = (id: number, outcome: string, body: string) => ({
      type: "entry",
      entry: {
        id,
        conversationId: 1,
        kind: "notice",
        data: { remoteCall: { id: 40 + id, tool: "ledger", outcome } },
        model: [{ role: "system", content: body, timestamp: 1 }],
      },
    });
    const line = JSON.stringify({
      first: 1,
      writes: [
        notice(1, "http_status", "Remote call 41 (tool ledger) failed (http_status).\nError:\nrow 4471 is locked"),
        notice(2, "error", "Remote call 42 (tool ledger) returned an error.\nOutput:\nrow 4471 is locked"),
        notice(3, "output", "Remote call 43 (tool ledger) returned.\nOutput:\nrow 4471 found"),
      ],
    });
    const shown = JSON.parse(redactor.line(line)) as { writes: { entry: { model: { content: string }[] } }[] };
    const texts = shown.writes.map((w) => w.entry.model[0]!.content);
    expect(texts[0]).toBe(`Remote call 41 (tool ledger) failed (http_status). ${WITHHELD}`);
    expect(texts[1]).toBe(`Remote call 42 (tool ledger) returned an error. ${WITHHELD}`);
    expect(texts[2]).toContain("row 4471 found");
  });

  it("importing onto an existing session is a conflict and changes nothing", async () => {
    const source = await answeredSession("export-conflict");
    const text = (await exported(source)).text;
    const before = await lastSeq(TENANT, source);
    const response = await imported(source, text);
    expect(response.status).toBe(409);
    expect(await lastSeq(TENANT, source)).toBe(before);
  });

  it("a client token may not export or import", async () => {
    const source = await answeredSession("export-roles");
    const jwt = await token(TENANT, "client");
    expect((await exported(source, jwt)).status).toBe(403);
    const response = await call("POST", `/v1/sessions/${uniqueSession("export-roles-copy")}/import`, {
      token: jwt,
      rawBody: "{}\n",
    });
    expect(response.status).toBe(403);
  });
});
