/**
 * A session deleted and created again under the same name is a new incarnation (docs/api.md "Sessions",
 * docs/tools.md "HTTP tools"): its task ids start over, but no key that leaves the object repeats one of
 * the old incarnation's (an HTTP tool's Idempotency-Key and webhook-id, pending ids, usage and
 * reservation keys), and an answer meant for the deleted incarnation (a stale console's approval, a
 * product's late result) is an unknown id to the new one.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, lastSeq, token, until } from "./http-fixtures.js";
import { resetSeams } from "./session-fixtures.js";
import { httpDefinition, postToolResult, ProductEndpoint, tasksOf } from "./tool-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `inc-${label}-${Date.now().toString(36)}-${tenants}`;
}

interface PendingView {
  readonly id: string;
  readonly taskId: number;
}

interface UsageDay {
  readonly sub: string | null;
  readonly inputs: number;
  readonly totalTokens: number;
}

/** Define the tenant's HTTP tools: `gate` asks for an approval first, `later` answers 202. */
async function defineTools(tenant: string): Promise<void> {
  const operator = await token(tenant, "operator");
  for (const [name, definition] of [
    ["gate", { ...httpDefinition("gate"), approval: "always" }],
    ["later", httpDefinition("later", { timeoutMs: 600_000 })],
  ] as const) {
    const response = await call("PUT", `/v1/tools/${name}`, { token: operator, body: definition });
    expect([200, 201], await response.clone().text()).toContain(response.status);
  }
}

async function create(tenant: string, name: string): Promise<void> {
  const response = await call("PUT", `/v1/sessions/${name}`, {
    token: await token(tenant, "client"),
    body: { model: "echo", selectedTools: ["gate", "later"] },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

async function remove(tenant: string, name: string): Promise<void> {
  const response = await call("DELETE", `/v1/sessions/${name}`, { token: await token(tenant, "operator") });
  expect(response.status, await response.clone().text()).toBe(200);
}

async function send(tenant: string, name: string, input: string, key?: string): Promise<Response> {
  return call("POST", `/v1/sessions/${name}/conversations/root/inputs`, {
    token: await token(tenant, "client"),
    body: { input },
    ...(key === undefined ? {} : { headers: { "idempotency-key": key } }),
  });
}

async function pendingItems(tenant: string, name: string): Promise<PendingView[]> {
  const response = await call("GET", `/v1/sessions/${name}/pending`, { token: await token(tenant, "client") });
  expect(response.status).toBe(200);
  return (await json<{ items: PendingView[] }>(response)).items;
}

async function firstPending(tenant: string, name: string): Promise<PendingView> {
  return until(async () => (await pendingItems(tenant, name))[0], "the approval", 1_000);
}

async function answer(tenant: string, name: string, id: string, approve: boolean): Promise<Response> {
  return call("POST", `/v1/sessions/${name}/pending/${id}`, {
    token: await token(tenant, "client"),
    body: { approve },
  });
}

async function tenantUsage(tenant: string): Promise<UsageDay> {
  const response = await call("GET", "/v1/usage", { token: await token(tenant, "operator") });
  expect(response.status, await response.clone().text()).toBe(200);
  const days = (await json<{ items: UsageDay[] }>(response)).items.filter((day) => day.sub === null);
  return days.reduce(
    (sum, day) => ({ sub: null, inputs: sum.inputs + day.inputs, totalTokens: sum.totalTokens + day.totalTokens }),
    {
      sub: null,
      inputs: 0,
      totalTokens: 0,
    },
  );
}

async function remoteCallStatus(tenant: string, name: string): Promise<{ id: number; status: string } | undefined> {
  const [rc] = await tasksOf(tenant, name, "remote_call");
  return rc === undefined ? undefined : { id: rc.id, status: rc.state.status };
}

describe("session incarnations", () => {
  it("A re-created session never reuses a key of the old one", async () => {
    const tenant = uniqueTenant("keys");
    const endpoint = new ProductEndpoint(tenant).reply("gate", () => ({ status: 200, body: { output: "opened" } }));
    setHostSeams({ fetch: endpoint.fetch });
    await defineTools(tenant);
    const limits = await call("PUT", "/v1/limits", {
      token: await token(tenant, "operator"),
      body: { tenant: { tokensPerDay: 1_000_000, inputsPerDay: 100 } },
    });
    expect(limits.status, await limits.clone().text()).toBe(200);
    const name = `again-${Date.now().toString(36)}`;

    /** One incarnation's run: an approved HTTP tool call under Idempotency-Key `same`; its pending id. */
    const run = async (): Promise<string> => {
      await create(tenant, name);
      const accepted = await send(tenant, name, '/call gate {"id":1}', "same");
      expect(accepted.status, await accepted.clone().text()).toBe(201);
      expect(await json(accepted)).toMatchObject({ duplicate: false });
      const item = await firstPending(tenant, name);
      expect((await answer(tenant, name, item.id, true)).status).toBe(200);
      await until(
        async () => ((await remoteCallStatus(tenant, name))?.status === "settled" ? true : undefined),
        "the call settled",
        1_000,
      );
      return item.id;
    };

    const firstPendingId = await run();
    const firstUsage = await until(
      async () => {
        const usage = await tenantUsage(tenant);
        return usage.totalTokens > 0 ? usage : undefined;
      },
      "the first incarnation's usage",
      1_000,
    );
    expect(firstUsage.inputs).toBe(1);
    await remove(tenant, name);

    const secondPendingId = await run();
    const [first, second] = endpoint.seen("gate");
    expect(endpoint.seen("gate")).toHaveLength(2);
    // The same task id in both incarnations, and yet neither key repeats.
    expect(second?.body["taskId"]).toBe(first?.body["taskId"]);
    expect(first?.key).toBe(first?.id);
    expect(second?.key).toBe(second?.id);
    expect(second?.key).not.toBe(first?.key);
    expect(second?.id).not.toBe(first?.id);
    expect(first?.key?.startsWith(`${name}:`)).toBe(true);
    expect(second?.key?.startsWith(`${name}:`)).toBe(true);
    expect(secondPendingId).not.toBe(firstPendingId);
    // The Idempotency-Key `same` was the old incarnation's: a new key here, counted; and the new
    // incarnation's model usage is metered on top of the old one's.
    const secondUsage = await until(
      async () => {
        const usage = await tenantUsage(tenant);
        return usage.totalTokens > firstUsage.totalTokens ? usage : undefined;
      },
      "the second incarnation's usage",
      1_000,
    );
    expect(secondUsage.inputs).toBe(2);
    expect(secondUsage.totalTokens).toBe(2 * firstUsage.totalTokens);
  });

  it("An answer for a deleted incarnation is refused", async () => {
    const tenant = uniqueTenant("answers");
    const endpoint = new ProductEndpoint(tenant)
      .reply("gate", () => ({ status: 200, body: { output: "opened" } }))
      .reply("later", () => ({ status: 202 }));
    setHostSeams({ fetch: endpoint.fetch });
    await defineTools(tenant);
    const name = `stale-${Date.now().toString(36)}`;

    // A stale console tab holds the old incarnation's pending id.
    await create(tenant, name);
    expect((await send(tenant, name, '/call gate {"id":1}')).status).toBe(201);
    const old = await firstPending(tenant, name);
    await remove(tenant, name);
    await create(tenant, name);
    expect((await send(tenant, name, '/call gate {"id":1}')).status).toBe(201);
    const current = await firstPending(tenant, name);
    expect(current.taskId).toBe(old.taskId);
    const before = await lastSeq(tenant, name);
    const refused = await answer(tenant, name, old.id, true);
    expect(refused.status).toBe(404);
    expect(await json(refused)).toMatchObject({ code: "pending_not_found" });
    expect(await lastSeq(tenant, name)).toBe(before);
    expect(await pendingItems(tenant, name)).toEqual([expect.objectContaining({ id: current.id })]);
    expect(endpoint.seen("gate")).toHaveLength(0);

    // A product's backend posts a late result for the old incarnation's 202'd call.
    await remove(tenant, name);
    await create(tenant, name);
    expect((await send(tenant, name, '/call later {"id":2}')).status).toBe(201);
    const accepted = async (): Promise<true | undefined> =>
      (await remoteCallStatus(tenant, name))?.status === "accepted" ? true : undefined;
    await until(accepted, "the old call was accepted", 1_000);
    const oldCall = endpoint.seen("later")[0];
    await remove(tenant, name);
    await create(tenant, name);
    expect((await send(tenant, name, '/call later {"id":2}')).status).toBe(201);
    await until(accepted, "the new call was accepted", 1_000);
    const newCall = endpoint.seen("later")[1];
    expect(newCall?.body["taskId"]).toBe(oldCall?.body["taskId"]);
    const taskId = Number(oldCall?.body["taskId"]);
    const seq = await lastSeq(tenant, name);
    const late = await postToolResult(
      tenant,
      name,
      taskId,
      "later",
      { output: "the old call's result" },
      { webhookId: oldCall?.id ?? "" },
    );
    expect(late.status, await late.clone().text()).toBe(404);
    expect(await lastSeq(tenant, name)).toBe(seq);
    expect((await remoteCallStatus(tenant, name))?.status).toBe("accepted");
    // The new incarnation's own result, under its own key, is recorded.
    const own = await postToolResult(
      tenant,
      name,
      taskId,
      "later",
      { output: "new" },
      { webhookId: newCall?.id ?? "" },
    );
    expect(own.status, await own.clone().text()).toBe(200);
  });
});
