/**
 * The pending list over HTTP (docs/api.md "Pending"): approvals and client tools park their tool call on
 * a durable answer, one item in the session's and the conversation's `pi.pending`; an answer is
 * recorded once (a second is refused with the first), a deadline applies the tool's policy on the
 * object's alarm, and a parked call survives evictions as a wait, never as a crash.
 *
 * Each test defines its tools with `PUT /v1/tools/{name}` under a tenant of its own, and creates its
 * sessions over HTTP, so their tenant (and its catalog) is known.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readSse } from "../../src/client/sse.js";
import type { JsonObject } from "../../src/storage/records.js";
import { DEFAULT_KILL_BOUND, setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, client, json, token, uniqueSession, until } from "./http-fixtures.js";
import { harnessOf, installSeams, ManualClock, resetSeams, type Seams } from "./session-fixtures.js";

const MIN = 60_000;

let tenants = 0;
let TENANT = "pending-tools";

/** The tenant's tool catalog: tools an operator defines over HTTP, as a product does. */
const catalog = {
  async define(name: string, definition: { handler: JsonObject; parameters?: JsonObject } & JsonObject): Promise<void> {
    const body = {
      description: `${name} (test)`,
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      ...definition,
    };
    const response = await call("PUT", `/v1/tools/${name}`, { token: await token(TENANT, "operator"), body });
    expect(response.status, await response.clone().text()).toBe(201);
  },
};

const client_ = (timeoutMs = 86_400_000) => ({ type: "client", timeoutMs });
const http_ = { type: "http", url: "https://product.test/tools", timeoutMs: 30_000, idempotent: false };

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
  // A tenant of its own per test: its catalog starts empty.
  tenants += 1;
  TENANT = `pending-${tenants}-${Date.now().toString(36)}`;
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

interface Item {
  id: string;
  type: "approval" | "client_tool";
  taskId: number;
  conversationId: number;
  name: string;
  arguments: JsonObject;
  createdAt: number;
  deadline?: number;
}

interface Entry {
  readonly kind: string;
  readonly model?: { role: string; content: unknown; isError?: boolean }[];
  readonly data?: {
    details?: { error?: string };
    diags?: { severity: string; message: string; code: string | null }[];
    isError?: boolean;
  };
}

/** A fresh stub of the session's Durable Object. */
function objectOf(name: string) {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${TENANT}:${name}`));
}

/** A session created over HTTP that selects `tools` (names of the tenant's catalog). */
async function sessionWith(tools: string[]): Promise<{ name: string; t: string }> {
  const name = uniqueSession("pending");
  const t = await token(TENANT, "client");
  const created = await call("PUT", `/v1/sessions/${name}`, { token: t, body: { selectedTools: tools } });
  expect(created.status, await created.clone().text()).toBe(201);
  return { name, t };
}

async function send(name: string, t: string, input: string): Promise<number> {
  const response = await call("POST", `/v1/sessions/${name}/conversations/root/inputs`, { token: t, body: { input } });
  expect(response.status).toBe(201);
  return (await json<{ inputId: number }>(response)).inputId;
}

async function pending(name: string, t: string, conversation?: string): Promise<Item[]> {
  const path =
    conversation === undefined
      ? `/v1/sessions/${name}/pending`
      : `/v1/sessions/${name}/conversations/${conversation}/pending`;
  const response = await call("GET", path, { token: t });
  expect(response.status).toBe(200);
  return (await json<{ items: Item[] }>(response)).items;
}

function untilItem(name: string, t: string, type: Item["type"]): Promise<Item> {
  return until(async () => (await pending(name, t)).find((item) => item.type === type), `a ${type} item`);
}

function answer(name: string, t: string, id: string, body: unknown): Promise<Response> {
  return call("POST", `/v1/sessions/${name}/pending/${id}`, { token: t, body });
}

async function inputStatus(name: string, t: string, inputId: number): Promise<string> {
  return (
    await json<{ result: { status: string } }>(
      await call("GET", `/v1/sessions/${name}/inputs/${inputId}`, { token: t }),
    )
  ).result.status;
}

function untilAnswered(name: string, t: string, inputId: number): Promise<true> {
  return until(
    async () => ((await inputStatus(name, t, inputId)) === "done" ? true : undefined),
    `input ${inputId} answered`,
    500,
  );
}

async function toolResults(name: string, t: string): Promise<Entry[]> {
  return (
    await json<{ items: Entry[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=tool_result`, { token: t }),
    )
  ).items;
}

function text(entry: Entry | undefined): string {
  const content = entry?.model?.[0]?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";
}

async function taskState(name: string, taskId: number): Promise<Record<string, unknown> | undefined> {
  return runInDurableObject(
    objectOf(name),
    async (instance: SessionObject) => (await harnessOf(instance).storage.getTasks([taskId])).get(taskId)?.state,
  );
}

function killRows(name: string): Promise<{ task: number; kills: number }[]> {
  return runInDurableObject(objectOf(name), (_instance, state) =>
    state.storage.sql
      .exec("SELECT task, kills FROM host_kills ORDER BY task")
      .toArray()
      .map((row) => ({ task: Number(row["task"]), kills: Number(row["kills"]) })),
  );
}

function alarmOf(name: string): Promise<number | null> {
  return runInDurableObject(objectOf(name), (_instance, state) => state.storage.getAlarm());
}

/**
 * Let the directory's activity update (an HTTP-created session reports its activity a minute later, on
 * the alarm) go out, so the alarm left is the tasks' own reason to wake: time moves on two minutes.
 */
async function flushDirectory(name: string): Promise<void> {
  seams.time.now += 2 * MIN;
  await runDurableObjectAlarm(objectOf(name));
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

async function notBusy(name: string): Promise<void> {
  await until(
    async () =>
      !(await runInDurableObject(objectOf(name), (instance: SessionObject) => harnessOf(instance).driver.busy))
        ? true
        : undefined,
    "not busy",
  );
}

/** The first frame of the conversation's (or the session's) watch: its view. */
async function watchView(
  name: string,
  of: "conversation" | "session" = "conversation",
): Promise<{ values: Record<string, unknown> }> {
  const api = await client(TENANT);
  const controller = new AbortController();
  const frames =
    of === "conversation"
      ? api.session(name).conversation("root").frames({ signal: controller.signal })
      : readSse(
          (
            await call("GET", `/v1/sessions/${name}/watch`, {
              token: await token(TENANT, "client"),
              headers: { accept: "text/event-stream" },
            })
          ).body as ReadableStream<Uint8Array>,
        );
  try {
    const first = await frames.next();
    if (first.done === true || first.value.event !== "view") throw new Error("the watch sent no view first");
    return JSON.parse(first.value.data) as { values: Record<string, unknown> };
  } finally {
    controller.abort();
    void frames.return(undefined).catch(() => undefined);
  }
}

describe("the pending list", () => {
  it("Approval survives reload and restart", async () => {
    await catalog.define("deploy", { handler: client_(), approval: "always" });
    const { name, t } = await sessionWith(["deploy"]);
    const inputId = await send(name, t, '/call deploy {"id":7}');

    const item = await untilItem(name, t, "approval");
    expect(item).toMatchObject({
      // t{task}-approval-{incarnation} (docs/api.md "Pending").
      id: expect.stringMatching(new RegExp(`^t${item.taskId}-approval-[0-9a-v]{10}$`)),
      type: "approval",
      name: "deploy",
      arguments: { id: 7 },
      conversationId: expect.any(Number),
    });
    expect(item.deadline).toBeUndefined();
    expect(await pending(name, t, "root")).toEqual([item]);
    // The conversation watch carries the list (a sticky value: its changes are value events).
    expect(JSON.stringify((await watchView(name)).values)).toContain(item.id);
    expect(JSON.stringify((await watchView(name, "session")).values)).toContain(item.id);
    await notBusy(name);
    expect(await killRows(name)).toEqual([]);
    await flushDirectory(name);
    // No deadline: nothing to wake for (the answer's route opens the object).
    expect(await alarmOf(name)).toBeNull();

    // Evicted more often than the kill bound: each reopen recovers the parked call and waits again.
    for (let round = 0; round < DEFAULT_KILL_BOUND + 1; round += 1) {
      await abortAllDurableObjects();
      expect(await pending(name, t)).toEqual([item]);
      await notBusy(name);
      expect(await killRows(name)).toEqual([]);
      expect(await taskState(name, item.taskId)).toMatchObject({
        status: "parked",
        pending: { id: item.id, type: "approval" },
      });
      expect(await alarmOf(name)).toBeNull();
    }
    const inspection = await json<{ quarantined: unknown[] }>(
      await call("GET", `/v1/sessions/${name}/inspect`, { token: await token(TENANT, "operator") }),
    );
    expect(inspection.quarantined).toEqual([]);

    // Approved: the call proceeds (a client tool next waits for its output), then settles.
    const approved = await answer(name, t, item.id, { approve: true });
    expect(approved.status).toBe(200);
    expect(await json(approved)).toMatchObject({ id: item.id, answer: { approve: true }, at: expect.any(Number) });
    const output = await untilItem(name, t, "client_tool");
    expect(output).toMatchObject({
      id: item.id.replace("-approval-", "-client-"),
      taskId: item.taskId,
      name: "deploy",
      arguments: { id: 7 },
    });
    expect((await answer(name, t, output.id, { output: "deployed 7" })).status).toBe(200);
    await untilAnswered(name, t, inputId);
    expect(await pending(name, t)).toEqual([]);
    expect(await pending(name, t, "root")).toEqual([]);
    const results = await toolResults(name, t);
    expect(results).toHaveLength(1);
    expect(text(results[0])).toBe("deployed 7");
    expect(await taskState(name, item.taskId)).toMatchObject({
      status: "done",
      resolved: [
        { id: item.id, type: "approval", outcome: "answered", answer: { approve: true } },
        { id: output.id, type: "client_tool", outcome: "answered", answer: { output: "deployed 7" } },
      ],
    });

    // An approved HTTP tool goes on to its HTTP call, from the definition captured with the call.
    const product = productSeam("shipped");
    await catalog.define("ship", { handler: http_, approval: "always" });
    const other = await sessionWith(["ship"]);
    const shipped = await send(other.name, other.t, '/call ship {"id":8}');
    const approval = await untilItem(other.name, other.t, "approval");
    await abortAllDurableObjects();
    expect((await answer(other.name, other.t, approval.id, { approve: true, reason: "ok" })).status).toBe(200);
    await untilAnswered(other.name, other.t, shipped);
    expect(await pending(other.name, other.t)).toEqual([]);
    expect(await taskState(other.name, approval.taskId)).toMatchObject({
      status: "done",
      resolved: [{ id: approval.id, outcome: "answered", answer: { approve: true, reason: "ok" } }],
    });
    const [shippedResult] = await toolResults(other.name, other.t);
    expect(shippedResult?.data?.details?.error).not.toBe("denied");
    expect(text(shippedResult)).toContain("shipped");
    expect(product.length).toBe(1);
  });

  it("Second answer is refused with the first", async () => {
    await catalog.define("pick_color", { handler: client_() });
    const { name, t } = await sessionWith(["pick_color"]);
    const inputId = await send(name, t, '/call pick_color {"id":1}');
    const item = await untilItem(name, t, "client_tool");

    const [a, b] = await Promise.all([
      answer(name, t, item.id, { output: "red" }),
      answer(name, t, item.id, { output: { color: "blue" }, isError: false }),
    ]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    const [won, lost] = a.status === 200 ? [a, b] : [b, a];
    const winner = await json<{ id: string; answer: unknown }>(won);
    const refused = await json<{ code: string; answer: unknown }>(lost);
    expect(refused.code).toBe("already_answered");
    expect(refused.answer).toEqual(winner.answer);

    await untilAnswered(name, t, inputId);
    const third = await answer(name, t, item.id, { output: "green" });
    expect(third.status).toBe(409);
    expect(await json(third)).toMatchObject({ code: "already_answered", answer: winner.answer });
    const results = await toolResults(name, t);
    expect(results).toHaveLength(1);
    const expected = winner.answer as { output: unknown };
    expect(text(results[0])).toBe(
      typeof expected.output === "string" ? expected.output : JSON.stringify(expected.output),
    );

    // An answer that does not fit the item's type, or an unknown item, writes nothing.
    expect(await json(await answer(name, t, item.id, { approve: true }))).toMatchObject({
      code: "invalid_body",
      field: "output",
    });
    expect(await json(await answer(name, t, item.id.replace("-client-", "-approval-"), { output: 1 }))).toMatchObject({
      code: "invalid_body",
      field: "approve",
    });
    const unknown = await answer(name, t, "t9999-client", { output: 1 });
    expect(unknown.status).toBe(404);
    expect(await json(unknown)).toMatchObject({ code: "pending_not_found" });
  });

  it("Approval deadline applies its policy", async () => {
    /** Evict, move the clock to the item's deadline and let only the alarm run. */
    async function pastDeadline(name: string, item: Item): Promise<void> {
      expect(item.deadline).toBeDefined();
      await notBusy(name);
      await flushDirectory(name);
      // The deadline is the object's alarm.
      expect(await alarmOf(name)).toBe(item.deadline);
      await abortAllDurableObjects();
      seams.time.now = Math.max(seams.time.now, item.deadline as number);
      expect(await runDurableObjectAlarm(objectOf(name))).toBe(true);
    }

    // onTimeout deny: an error result, and a late answer is refused with how the item closed.
    {
      await catalog.define("risky", {
        handler: client_(),
        approval: "always",
        approvalTimeoutMs: 10 * MIN,
        onTimeout: "deny",
      });
      const { name, t } = await sessionWith(["risky"]);
      const inputId = await send(name, t, '/call risky {"id":1}');
      const item = await untilItem(name, t, "approval");
      expect(item.deadline).toBe(item.createdAt + 10 * MIN);
      await pastDeadline(name, item);
      await untilAnswered(name, t, inputId);
      const [result] = await toolResults(name, t);
      expect(result?.model?.[0]?.isError).toBe(true);
      expect(result?.data?.details?.error).toBe("approval_timeout");
      expect(result?.data?.diags?.map((d) => d.code)).toContain("approval_timeout");
      expect(await pending(name, t)).toEqual([]);
      // A late answer is refused with how the item closed.
      const late = await answer(name, t, item.id, { approve: true });
      expect(late.status).toBe(409);
      expect(await json(late)).toMatchObject({ code: "pending_closed", outcome: "timeout" });
    }

    // onTimeout allow, a client tool: it parks for its output, and its result says it ran without approval.
    {
      await catalog.define("lenient", {
        handler: client_(),
        approval: "always",
        approvalTimeoutMs: 10 * MIN,
        onTimeout: "allow",
      });
      const { name, t } = await sessionWith(["lenient"]);
      const inputId = await send(name, t, '/call lenient {"id":2}');
      const item = await untilItem(name, t, "approval");
      await pastDeadline(name, item);
      const output = await untilItem(name, t, "client_tool");
      expect((await pending(name, t)).map((i) => i.id)).toEqual([output.id]);
      expect((await answer(name, t, output.id, { output: "ran" })).status).toBe(200);
      await untilAnswered(name, t, inputId);
      const [result] = await toolResults(name, t);
      expect(text(result)).toContain("ran");
      expect(text(result)).toContain("approval timed out; onTimeout allow: ran without approval");
      expect(result?.model?.[0]?.isError).toBe(false);
      expect(await json(await answer(name, t, item.id, { approve: false }))).toMatchObject({
        code: "pending_closed",
        outcome: "timeout",
      });
    }

    // onTimeout allow, an HTTP tool: the call goes on to the HTTP path (the product answers on the fetch seam).
    {
      const product = productSeam("found 3");
      await catalog.define("lookup_later", {
        handler: http_,
        approval: "always",
        approvalTimeoutMs: 10 * MIN,
        onTimeout: "allow",
      });
      const { name, t } = await sessionWith(["lookup_later"]);
      const inputId = await send(name, t, '/call lookup_later {"id":3}');
      const item = await untilItem(name, t, "approval");
      await pastDeadline(name, item);
      await untilAnswered(name, t, inputId);
      const [result] = await toolResults(name, t);
      // The call reached the HTTP tool (whatever its transport answered), never a denial.
      expect(result?.data?.details?.error).not.toBe("approval_timeout");
      expect(text(result)).toContain("approval timed out; onTimeout allow: ran without approval");
      expect(await taskState(name, item.taskId)).toMatchObject({
        status: "done",
        resolved: [{ id: item.id, outcome: "timeout" }],
      });
      expect(text(result)).toContain("found 3");
      expect(product.length).toBe(1);
    }

    // A client tool's own deadline (timeoutMs).
    {
      await catalog.define("slow_client", { handler: client_(10 * MIN) });
      const { name, t } = await sessionWith(["slow_client"]);
      const inputId = await send(name, t, '/call slow_client {"id":4}');
      const item = await untilItem(name, t, "client_tool");
      expect(item.deadline).toBe(item.createdAt + 10 * MIN);
      await pastDeadline(name, item);
      await untilAnswered(name, t, inputId);
      const [result] = await toolResults(name, t);
      expect(result?.model?.[0]?.isError).toBe(true);
      expect(result?.data?.diags?.map((d) => d.code)).toContain("client_timeout");
      expect(await json(await answer(name, t, item.id, { output: "late" }))).toMatchObject({
        code: "pending_closed",
        outcome: "timeout",
      });
    }
  });

  it("Invalid arguments are a tool error, not a failed turn", async () => {
    await catalog.define("lookup", {
      handler: http_,
      parameters: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
    });
    const { name, t } = await sessionWith(["lookup"]);
    const response = await call("POST", `/v1/sessions/${name}/conversations/root/inputs?wait=20`, {
      token: t,
      body: { input: '/call lookup {"id":"x"}' },
    });
    expect(response.status).toBe(201);
    const accepted = await json<{ result: { status: string; answer?: unknown } }>(response);
    expect(accepted.result.status).toBe("done");
    const results = await toolResults(name, t);
    expect(results).toHaveLength(1);
    expect(results[0]?.model?.[0]?.isError).toBe(true);
    expect(text(results[0])).toMatch(/^Validation failed/);
    expect(results[0]?.data?.details?.error).toBe("invalid_arguments");
    expect(await pending(name, t)).toEqual([]);
    // Nothing parked or ran: the task settled from planned.
    const tasks = await json<{ items: { kind: string; state: { status: string; resolved?: unknown } }[] }>(
      await call("GET", `/v1/sessions/${name}/tasks`, { token: await token(TENANT, "operator") }),
    );
    expect(tasks.items.filter((task) => task.kind === "tool").map((task) => task.state.status)).toEqual(["done"]);
  });

  it("an abort closes a parked call: its item leaves the list, a late answer is pending_closed", async () => {
    await catalog.define("sign", { handler: client_(), approval: "always" });
    const { name, t } = await sessionWith(["sign"]);
    const inputId = await send(name, t, '/call sign {"id":5}');
    const item = await untilItem(name, t, "approval");
    await notBusy(name);
    expect((await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: t })).status).toBe(200);
    await until(
      async () => ((await taskState(name, item.taskId))?.["status"] === "aborted" ? true : undefined),
      "the call aborted",
    );
    expect(await taskState(name, item.taskId)).toMatchObject({
      status: "aborted",
      resolved: [{ id: item.id, type: "approval", outcome: "aborted" }],
    });
    expect(await pending(name, t)).toEqual([]);
    expect(await pending(name, t, "root")).toEqual([]);
    const late = await answer(name, t, item.id, { approve: true });
    expect(late.status).toBe(409);
    expect(await json(late)).toMatchObject({ code: "pending_closed", outcome: "aborted" });
    const [result] = await toolResults(name, t);
    expect(text(result)).toContain("aborted while it waited for an approval");
    expect(await inputStatus(name, t, inputId)).not.toBe("running");
  });

  it("a turn parked on a client tool keeps no alarm", async () => {
    await catalog.define("confirm", { handler: client_(), approval: "always" });
    await catalog.define("form", { handler: client_(10 * MIN) });
    const { name, t } = await sessionWith(["confirm"]);
    await send(name, t, '/call confirm {"id":1}');
    const item = await untilItem(name, t, "approval");
    await notBusy(name);
    await flushDirectory(name);
    expect(await alarmOf(name)).toBeNull();
    // A later commit while the turn waits (an input queued behind it) arms nothing: the blocked
    // post_tools is no reason to wake, and no guard alarm fires every second.
    await send(name, t, "queued behind the approval");
    await notBusy(name);
    await flushDirectory(name);
    expect(await alarmOf(name)).toBeNull();
    expect(await runDurableObjectAlarm(objectOf(name))).toBe(false);
    expect((await pending(name, t)).map((i) => i.id)).toEqual([item.id]);

    // With a deadline, the alarm is the deadline (not a guard a second away), after a later commit too.
    const other = await sessionWith(["form"]);
    await send(other.name, other.t, '/call form {"id":1}');
    const form = await untilItem(other.name, other.t, "client_tool");
    await notBusy(other.name);
    await send(other.name, other.t, "queued behind the form");
    await notBusy(other.name);
    await flushDirectory(other.name);
    expect(await alarmOf(other.name)).toBe(form.deadline);
  });
});
