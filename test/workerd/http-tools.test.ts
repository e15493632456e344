/**
 * HTTP tools over HTTP (docs/tools.md): the tenant defines an HTTP tool (PUT /v1/tools), a session
 * created over HTTP (so its tenant is known) selects it, the offline echo model calls it
 * (`/call NAME {json}`), and the call runs as a background `remote_call` task that POSTs to the
 * product's endpoint (a `ProductEndpoint` on HostSeams.fetch), signed with the tool's derived secret.
 * A 202 waits for a signed result POST to /v1/tool-results.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { remoteBackoffMs, remoteCallDefinition } from "../../src/kinds/remote-call.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";
import { addTask, clockOf, ManualClock, ManualTime, resetSeams, taskOf, TestSession } from "./session-fixtures.js";
import { defineTool, entriesOf, postToolResult, ProductEndpoint, tasksOf, textOf } from "./tool-fixtures.js";

const TENANT = "tools";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

/** Install the endpoint (and optionally a manual clock) for the next sessions and define the tenant's HTTP tools. */
async function install(
  endpoint: Pick<ProductEndpoint, "fetch">,
  tools: Record<string, { idempotent?: boolean; timeoutMs?: number }>,
  time?: ManualTime,
): Promise<void> {
  setHostSeams({ fetch: endpoint.fetch, ...(time === undefined ? {} : { clock: () => new ManualClock(time) }) });
  for (const [name, options] of Object.entries(tools)) await defineTool(TENANT, name, options);
}

async function createSession(
  name: string,
  tools: readonly string[],
  extra: Record<string, unknown> = {},
): Promise<void> {
  const response = await call("PUT", `/v1/sessions/${name}`, {
    token: await token(TENANT, "client"),
    body: { model: "echo", selectedTools: tools, ...extra },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

async function send(
  name: string,
  input: string,
  wait?: number,
): Promise<{ inputId: number; result: { status: string } }> {
  const response = await call(
    "POST",
    `/v1/sessions/${name}/conversations/root/inputs${wait === undefined ? "" : `?wait=${wait}`}`,
    { token: await token(TENANT, "client"), body: { input } },
  );
  expect([201, 202]).toContain(response.status);
  return json(response);
}

async function inputDone(name: string, inputId: number): Promise<void> {
  const t = await token(TENANT, "client");
  await until(
    async () => {
      const view = await json<{ result: { status: string } }>(
        await call("GET", `/v1/sessions/${name}/inputs/${inputId}`, { token: t }),
      );
      return view.result.status === "done" ? true : undefined;
    },
    `input ${inputId} done`,
    1000,
  );
}

function stubOf(name: string): DurableObjectStub<SessionObject> {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${TENANT}:${name}`)) as unknown as DurableObjectStub<SessionObject>;
}

describe("HTTP tools", () => {
  it("HTTP tool is called once with the task's idempotency key", async () => {
    const endpoint = new ProductEndpoint(TENANT).reply("lookup", () => ({
      status: 200,
      body: { output: { id: 1, name: "Ada" } },
    }));
    await install(endpoint, { lookup: { idempotent: false } });
    const name = uniqueSession("http-tool");
    await createSession(name, ["lookup"]);
    const accepted = await send(name, '/call lookup {"id":1}', 10);
    expect(accepted.result.status).toBe("done");

    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect(rc?.state).toMatchObject({
      status: "settled",
      attempts: 1,
      outcome: { type: "output", output: { id: 1, name: "Ada" }, isError: false },
    });
    const seen = endpoint.seen("lookup");
    expect(seen).toHaveLength(1);
    const request = seen[0];
    // {session}:{incarnation}:{taskId} (docs/tools.md "HTTP tools").
    expect(request?.key).toMatch(new RegExp(`^${name}:[0-9a-v]{10}:${rc?.id}$`));
    expect(request?.id).toBe(request?.key);
    expect(request?.verified).toBe(true);
    const [toolTask] = await tasksOf(TENANT, name, "tool");
    expect(request?.body).toEqual({
      session: name,
      conversationId: expect.any(Number),
      taskId: rc?.id,
      toolCallId: (toolTask?.state["call"] as { id: string }).id,
      name: "lookup",
      arguments: { id: 1 },
    });
    const results = await entriesOf(TENANT, name, "tool_result");
    expect(results).toHaveLength(1);
    expect(textOf(results[0])).toBe('{"id":1,"name":"Ada"}');
    expect(results[0]?.model?.[0]?.isError).toBe(false);
    // The echo model answers with the tool's result: the input's answer holds the output.
    const answers = await entriesOf(TENANT, name, "assistant");
    expect(textOf(answers[answers.length - 1])).toBe('{"id":1,"name":"Ada"}');
  });

  it("Non-idempotent HTTP tool with an uncertain send settles outcome_unknown", async () => {
    const endpoint = new ProductEndpoint(TENANT).reply("charge", () => "hang");
    await install(endpoint, { charge: { idempotent: false } });
    const name = uniqueSession("uncertain");
    await createSession(name, ["charge"]);
    const accepted = await send(name, '/call charge {"id":7}');
    await until(
      async () => (endpoint.seen("charge").length === 1 ? true : undefined),
      "the request reached the endpoint",
    );
    const [dispatched] = await tasksOf(TENANT, name, "remote_call");
    expect(dispatched?.state.status).toBe("dispatched");

    // The object dies while the request is in flight; only the alarm brings it back.
    await abortAllDurableObjects();
    expect(await runDurableObjectAlarm(stubOf(name))).toBe(true);
    await inputDone(name, accepted.inputId);

    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect(rc?.state).toMatchObject({ status: "settled", outcome: { type: "error", code: "outcome_unknown" } });
    const results = await entriesOf(TENANT, name, "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]?.model?.[0]?.isError).toBe(true);
    expect(results[0]?.data?.["details"]).toMatchObject({ error: "outcome_unknown" });
    expect(textOf(results[0])).toContain(`remote call task ${rc?.id} may have reached`);
    expect(textOf(results[0])).toContain(`Idempotency-Key ${endpoint.seen("charge")[0]?.key}`);
    expect(endpoint.seen("charge")).toHaveLength(1);
    const inspection = await json<{ quarantined: unknown[] }>(
      await call("GET", `/v1/sessions/${name}/inspect`, { token: await token(TENANT, "operator") }),
    );
    expect(inspection.quarantined).toEqual([]);
  });

  it("Late 202 result lands once", async () => {
    const time = new ManualTime();
    const endpoint = new ProductEndpoint(TENANT).reply("report", () => ({ status: 202 }));
    await install(endpoint, { report: { idempotent: false, timeoutMs: 600_000 } }, time);
    const name = uniqueSession("late");
    await createSession(name, ["report"], { budgetMs: 1000 });
    const accepted = await send(name, '/call report {"id":3}');
    await until(
      async () => ((await tasksOf(TENANT, name, "remote_call"))[0]?.state.status === "accepted" ? true : undefined),
      "the call was accepted",
    );
    const [rc] = await tasksOf(TENANT, name, "remote_call");
    const rcId = rc?.id ?? 0;

    // The blocking budget passes on the manual clock: the call delegates and the turn goes on.
    await runInDurableObject(stubOf(name), (instance: SessionObject) => clockOf(instance).advanceTo(time.now + 1001));
    await inputDone(name, accepted.inputId);
    const results = await entriesOf(TENANT, name, "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]?.data?.["delegated"]).toBe(rcId);
    expect(textOf(results[0])).toContain(`[info] still running as remote call ${rcId}; its result arrives as a notice`);
    expect((results[0]?.data?.["diags"] as { code?: string }[]).map((d) => d.code)).toContain("budget");
    expect(await entriesOf(TENANT, name, "notice")).toHaveLength(0);

    // A result signed for another task's id is refused, writing nothing.
    const before = await lastSeq(TENANT, name);
    expect(
      (
        await postToolResult(
          TENANT,
          name,
          rcId,
          "report",
          { output: "forged" },
          {
            webhookId: (endpoint.seen("report")[0]?.key ?? "").replace(/:[0-9]+$/, `:${rcId + 1}`),
          },
        )
      ).status,
    ).toBe(401);
    expect((await postToolResult(TENANT, name, rcId + 1000, "report", { output: "unknown" })).status).toBe(401);
    // Signed with another tool's secret.
    expect((await postToolResult(TENANT, name, rcId, "other", { output: "forged" })).status).toBe(401);
    expect(await lastSeq(TENANT, name)).toBe(before);

    const first = await postToolResult(TENANT, name, rcId, "report", { output: { rows: 3 } });
    expect(first.status).toBe(200);
    expect(await json(first)).toMatchObject({ taskId: rcId, recordedAt: expect.any(Number) });
    await until(
      async () => ((await tasksOf(TENANT, name, "remote_call"))[0]?.state.status === "settled" ? true : undefined),
      "the call settled",
    );
    await until(async () => ((await entriesOf(TENANT, name, "notice")).length === 1 ? true : undefined), "the notice");

    const settled = await lastSeq(TENANT, name);
    const again = await postToolResult(TENANT, name, rcId, "report", { output: { rows: 4 } });
    expect(again.status).toBe(409);
    expect(await lastSeq(TENANT, name)).toBe(settled);
    expect(await json(again)).toMatchObject({ code: "already_answered", answer: { output: { rows: 3 } } });
    const notices = await entriesOf(TENANT, name, "notice");
    expect(notices).toHaveLength(1);
    expect(textOf(notices[0])).toContain(`Remote call ${rcId} (tool report) returned.`);
    expect(textOf(notices[0])).toContain('{"rows":3}');
    expect(await entriesOf(TENANT, name, "tool_result")).toHaveLength(1);
    expect(endpoint.seen("report")).toHaveLength(1);
  });

  it("an idempotent tool answering 500 is retried on the clock with backoff, up to 8 attempts", async () => {
    const time = new ManualTime();
    const endpoint = new ProductEndpoint(TENANT).reply("sync", () => ({
      status: 500,
      body: { detail: "the database is down" },
    }));
    await install(endpoint, { sync: { idempotent: true } }, time);
    const name = uniqueSession("retry");
    await createSession(name, ["sync"], { budgetMs: 3_600_000 });
    const accepted = await send(name, '/call sync {"id":9}');
    for (let attempt = 1; attempt < 8; attempt++) {
      const waiting = await until(async () => {
        const [rc] = await tasksOf(TENANT, name, "remote_call");
        return rc?.state.status === "retry_wait" && rc.state["attempt"] === attempt ? rc : undefined;
      }, `retry_wait after attempt ${attempt}`);
      expect(endpoint.seen("sync")).toHaveLength(attempt);
      // The next attempt waits its backoff from the failure (no time passed since on the manual clock).
      expect(waiting.state["nextAt"]).toBe(time.now + remoteBackoffMs(attempt, waiting.id));
      expect(remoteBackoffMs(attempt, waiting.id)).toBeGreaterThanOrEqual(1000 * 2 ** (attempt - 1));
      expect(remoteBackoffMs(attempt, waiting.id)).toBeLessThanOrEqual(1250 * 2 ** (attempt - 1));
      // Nothing is sent before the wake.
      await runInDurableObject(stubOf(name), (instance: SessionObject) =>
        clockOf(instance).advanceTo((waiting.state["nextAt"] as number) - 1),
      );
      expect(endpoint.seen("sync")).toHaveLength(attempt);
      await runInDurableObject(stubOf(name), (instance: SessionObject) =>
        clockOf(instance).advanceTo(waiting.state["nextAt"] as number),
      );
      await until(
        async () => (endpoint.seen("sync").length === attempt + 1 ? true : undefined),
        `attempt ${attempt + 1}`,
      );
    }
    await inputDone(name, accepted.inputId);
    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect(rc?.state).toMatchObject({ status: "settled", attempts: 8, outcome: { type: "error", code: "failed" } });
    const keys = new Set(endpoint.seen("sync").map((r) => r.key));
    expect([...keys]).toHaveLength(1);
    expect([...keys][0]).toMatch(new RegExp(`^${name}:[0-9a-v]{10}:${rc?.id}$`));
    expect(endpoint.seen("sync")).toHaveLength(8);
    const results = await entriesOf(TENANT, name, "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]?.data?.["details"]).toMatchObject({ error: "failed", http: { status: 500 } });
    expect(textOf(results[0])).toContain("failed 8 times");
  });
  it("a 4xx answer is an error result carrying the product's problem", async () => {
    const problem = { type: "about:blank", title: "Unprocessable", status: 422, detail: "no customer 5" };
    const endpoint = new ProductEndpoint(TENANT).reply("lookup", () => ({ status: 422, body: problem }));
    await install(endpoint, { lookup: { idempotent: true } });
    const name = uniqueSession("refused");
    await createSession(name, ["lookup"]);
    expect((await send(name, '/call lookup {"id":5}', 10)).result.status).toBe("done");
    const [result] = await entriesOf(TENANT, name, "tool_result");
    expect(result?.model?.[0]?.isError).toBe(true);
    expect(textOf(result)).toContain("HTTP 422: no customer 5");
    expect(result?.data?.["details"]).toMatchObject({ error: "http_status", http: { status: 422, problem } });
    // A refusal is final, even for an idempotent tool.
    expect(endpoint.seen("lookup")).toHaveLength(1);
  });

  it("a result posted before the 202 wins", async () => {
    const name = uniqueSession("early");
    // The product posts its result first, then answers 202.
    const early = new ProductEndpoint(TENANT).reply("report", () => ({ status: 202 }));
    const posted: number[] = [];
    await install(
      {
        fetch: async (request) => {
          const body = (await request.clone().json()) as { taskId: number };
          // Under the key the request carries (the endpoint has not recorded it yet).
          const webhookId = request.headers.get("webhook-id") ?? "";
          posted.push(
            (await postToolResult(TENANT, name, body.taskId, "report", { output: "early result" }, { webhookId }))
              .status,
          );
          return early.fetch(request);
        },
      },
      { report: { idempotent: false } },
    );
    await createSession(name, ["report"]);
    expect((await send(name, '/call report {"id":4}', 10)).result.status).toBe("done");
    expect(posted).toEqual([200]);
    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect(rc?.state).toMatchObject({ status: "settled", outcome: { type: "output", output: "early result" } });
    const [result] = await entriesOf(TENANT, name, "tool_result");
    expect(textOf(result)).toBe("early result");
    expect(early.requests).toHaveLength(1);
  });

  it("a result posted after the call was aborted is refused as closed", async () => {
    const time = new ManualTime();
    const endpoint = new ProductEndpoint(TENANT).reply("report", () => ({ status: 202 }));
    await install(endpoint, { report: { idempotent: false, timeoutMs: 600_000 } }, time);
    const name = uniqueSession("aborted");
    await createSession(name, ["report"]);
    await send(name, '/call report {"id":6}');
    await until(
      async () => ((await tasksOf(TENANT, name, "remote_call"))[0]?.state.status === "accepted" ? true : undefined),
      "the call was accepted",
    );
    expect(
      (await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: await token(TENANT, "client") }))
        .status,
    ).toBe(200);
    await until(
      async () => ((await tasksOf(TENANT, name, "remote_call"))[0]?.role === "terminal" ? true : undefined),
      "the remote call ended",
    );
    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect(rc?.state).toMatchObject({ status: "aborted", outcome: { type: "error", code: "aborted" } });
    const late = await postToolResult(TENANT, name, rc?.id ?? 0, "report", { output: "too late" });
    expect(late.status).toBe(409);
    expect(await json(late)).toMatchObject({ code: "pending_closed", outcome: "aborted" });
    expect(await entriesOf(TENANT, name, "notice")).toHaveLength(0);
  });
  it("a call waiting for its posted result survives restarts without counting kills", async () => {
    const time = new ManualTime();
    const endpoint = new ProductEndpoint(TENANT).reply("report", () => ({ status: 202 }));
    await install(endpoint, { report: { idempotent: false, timeoutMs: 600_000 } }, time);
    const name = uniqueSession("restarts");
    await createSession(name, ["report"], { budgetMs: 1000 });
    const accepted = await send(name, '/call report {"id":8}');
    await until(
      async () => ((await tasksOf(TENANT, name, "remote_call"))[0]?.state.status === "accepted" ? true : undefined),
      "the call was accepted",
    );
    await runInDurableObject(stubOf(name), (instance: SessionObject) => clockOf(instance).advanceTo(time.now + 1001));
    await inputDone(name, accepted.inputId);
    const operator = await token(TENANT, "operator");
    // More restarts than the kill bound: each reopens by the deadline's alarm and waits again.
    for (let restart = 0; restart < 5; restart++) {
      await abortAllDurableObjects();
      expect(await runDurableObjectAlarm(stubOf(name))).toBe(true);
      await until(
        async () =>
          (await json<{ busy: boolean }>(await call("GET", `/v1/sessions/${name}/inspect`, { token: operator }))).busy
            ? undefined
            : true,
        "parked again",
      );
    }
    const inspection = await json<{
      kills: unknown[];
      quarantined: unknown[];
      inflight: { state: { status: string } }[];
    }>(await call("GET", `/v1/sessions/${name}/inspect`, { token: operator }));
    expect(inspection.kills).toEqual([]);
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.inflight.map((t) => t.state.status)).toEqual(["accepted"]);
    const [rc] = await tasksOf(TENANT, name, "remote_call");
    expect((await postToolResult(TENANT, name, rc?.id ?? 0, "report", { output: "after restarts" })).status).toBe(200);
    await until(async () => ((await entriesOf(TENANT, name, "notice")).length === 1 ? true : undefined), "the notice");
    expect(endpoint.seen("report")).toHaveLength(1);
  });

  it("a session created without a tenant settles its remote calls no_tenant", async () => {
    const endpoint = new ProductEndpoint(TENANT).reply("lookup", () => ({ status: 200, body: { output: "never" } }));
    setHostSeams({ fetch: endpoint.fetch });
    // Created over RPC, with no tenant: no catalog, and nowhere its remote calls could be signed for.
    const session = new TestSession("no-tenant");
    expect((await session.rpc.createSession({ model: "echo" })).ok).toBe(true);
    const target = {
      type: "http" as const,
      tool: "lookup",
      version: 1,
      url: "https://product.test/lookup",
      timeoutMs: 30_000,
      idempotent: true,
    };
    const id = await addTask(session, remoteCallDefinition, {
      status: "planned",
      target,
      name: "lookup",
      arguments: { id: 1 },
      origin: { tool: "lookup", task: 1, callId: "call_1" },
    });
    const settled = await until(async () => {
      const task = await taskOf(session, id);
      return task?.role === "terminal" ? task : undefined;
    }, "the remote call settled");
    expect(settled.state).toMatchObject({ status: "settled", outcome: { type: "error", code: "no_tenant" } });
    expect(endpoint.requests).toHaveLength(0);
  });
});
