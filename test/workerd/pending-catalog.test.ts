/**
 * A call uses the catalog definition captured when it was created (docs/tools.md "How a session learns
 * the catalog"): a call parked on its approval while the tool is redefined, and after the session's copy
 * of the catalog has expired, still runs its first version; only calls created afterwards use the new one.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { call, json, token, until } from "./http-fixtures.js";
import { defineTool, ok, ProductEndpoint } from "./product-endpoint.js";
import { ManualClock, ManualTime } from "./session-fixtures.js";

const TENANT = "catalog-in-flight";
const TTL_MS = 30_000;
const URL_A = "https://a.example/refund";
const URL_B = "https://b.example/refund";

interface TaskView {
  id: number;
  kind: string;
  role: string;
  state: Record<string, unknown> & { status: string };
}

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

async function tasks(session: string): Promise<TaskView[]> {
  const response = await call("GET", `/v1/sessions/${session}/tasks?limit=200`, {
    token: await token(TENANT, "operator"),
  });
  expect(response.status).toBe(200);
  return (await json<{ items: TaskView[] }>(response)).items;
}

describe("catalog capture", () => {
  it("Catalog change does not alter a call in flight", async () => {
    const time = new ManualTime();
    const endpoint = new ProductEndpoint(TENANT, (seen) => ok(`${seen.url} ${JSON.stringify(seen.body.arguments)}`));
    endpoint.install({ clock: () => new ManualClock(time), catalogTtlMs: TTL_MS });
    const client = await token(TENANT, "client");
    const session = `in-flight-${Date.now().toString(36)}`;

    const v1Response = await defineTool(TENANT, "refund", {
      description: "Refund an order (v1)",
      parameters: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
      handler: { type: "http", url: URL_A },
      approval: "always",
    });
    expect(v1Response.status, await v1Response.clone().text()).toBe(201);
    const v1 = (await json<{ version: number }>(v1Response)).version;

    expect(
      (await call("PUT", `/v1/sessions/${session}`, { token: client, body: { selectedTools: ["refund"] } })).status,
    ).toBe(201);
    const first = await json<{ inputId: number }>(
      await call("POST", `/v1/sessions/${session}/conversations/root/inputs`, {
        token: client,
        body: { input: '/call refund {"id":7}' },
      }),
    );
    const [item] = await until(
      async () => {
        const items = (
          await json<{ items: { id: string; taskId: number }[] }>(
            await call("GET", `/v1/sessions/${session}/pending`, { token: client }),
          )
        ).items;
        return items.length > 0 ? items : undefined;
      },
      "the approval",
      1_000,
    );
    expect(item).toBeDefined();

    // v2: another URL, other parameters, no approval; then the session's copy of the catalog expires.
    const v2Response = await defineTool(TENANT, "refund", {
      description: "Refund an order (v2)",
      parameters: { type: "object", properties: { order: { type: "string" } }, required: ["order"] },
      handler: { type: "http", url: URL_B },
    });
    expect(v2Response.status, await v2Response.clone().text()).toBe(200);
    const v2 = (await json<{ version: number }>(v2Response)).version;
    expect(v2).toBeGreaterThan(v1);
    time.now += TTL_MS + 1_000;
    // A turn in a fork reads the catalog again (its copy expired), so the session's copy is v2 now.
    const fork = await json<{ conversationId: number }>(
      await call("POST", `/v1/sessions/${session}/conversations/root/fork`, { token: client, body: { at: "start" } }),
    );
    const forkConfig = await call("PATCH", `/v1/sessions/${session}/conversations/${fork.conversationId}/config`, {
      token: client,
      body: { model: "echo", selectedTools: ["refund"] },
    });
    expect(forkConfig.status, await forkConfig.clone().text()).toBe(200);
    const other = await call("POST", `/v1/sessions/${session}/conversations/${fork.conversationId}/inputs?wait=10`, {
      token: client,
      body: { input: "anything new?" },
    });
    expect((await json<{ status: string }>(other)).status).toBe("done");

    const parked = (await tasks(session)).find((t) => t.id === item?.taskId);
    expect(parked?.state).toMatchObject({
      status: "parked",
      def: { name: "refund", version: v1, definition: { handler: { url: URL_A } } },
    });

    // Approve: the call runs the definition it was created with.
    const approved = await call("POST", `/v1/sessions/${session}/pending/${item?.id ?? ""}`, {
      token: client,
      body: { approve: true },
    });
    expect(approved.status, await approved.clone().text()).toBe(200);
    await until(
      async () => {
        const r = (
          await json<{ result: { status: string } }>(
            await call("GET", `/v1/sessions/${session}/inputs/${first.inputId}`, { token: client }),
          )
        ).result;
        return r.status === "done" ? r : undefined;
      },
      "the first call's answer",
      1_000,
    );
    expect(endpoint.requests.map((r) => r.url)).toEqual([URL_A]);
    expect(endpoint.requests[0]?.body.arguments).toEqual({ id: 7 });
    const firstRemote = (await tasks(session)).filter((t) => t.kind === "remote_call");
    expect(firstRemote).toHaveLength(1);
    expect(firstRemote[0]?.state).toMatchObject({ target: { type: "http", tool: "refund", version: v1, url: URL_A } });

    // A new call uses v2: its URL, its parameters, no approval.
    const second = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
      token: client,
      body: { input: '/call refund {"order":"A-7"}' },
    });
    expect((await json<{ status: string }>(second)).status).toBe("done");
    expect(endpoint.requests.map((r) => r.url)).toEqual([URL_A, URL_B]);
    expect(endpoint.requests[1]?.body.arguments).toEqual({ order: "A-7" });
    const remotes = (await tasks(session)).filter((t) => t.kind === "remote_call");
    expect(remotes.map((t) => (t.state["target"] as { version: number }).version)).toEqual([v1, v2]);
    expect(endpoint.refused).toEqual([]);
  });
});
