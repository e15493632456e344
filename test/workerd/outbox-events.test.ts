/**
 * The event types besides input.completed (docs/integrations.md "Event types"), each from the commit
 * that reports it: a job that ends (`job.finished`), a schedule occurrence (`schedule.fired`), and the
 * turn that leaves the session without live foreground turns (`session.idle`). The receiver stands
 * behind the host's fetch seam.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { clockOf, ManualClock, ManualTime } from "./session-fixtures.js";
import { call, json, stubOf, token, uniqueSession, until } from "./http-fixtures.js";
import { Receiver, registerEndpoint } from "./event-fixtures.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

const ALL = [
  "input.completed",
  "turn.failed",
  "session.idle",
  "schedule.fired",
  "job.finished",
  "rig.escalation",
  "pending.created",
  "pending.resolved",
  "delivery.disabled",
];

describe("event types", () => {
  it("a job that ends is job.finished; the turn that ends last is session.idle", async () => {
    const receiver = new Receiver();
    setHostSeams({ fetch: receiver.fetch });
    const tenant = "events-jobs";
    const session = uniqueSession("job");
    const client = await token(tenant, "client");
    await registerEndpoint(tenant, { url: "https://receiver.test/jobs", events: ALL });
    expect(
      (await call("PUT", `/v1/sessions/${session}`, { token: client, body: { selectedTools: ["echo", "job"] } }))
        .status,
    ).toBe(201);
    const res = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=20`, {
      token: client,
      body: { input: '/call job {"cmd":"echo from a job; exit 0"}' },
    });
    expect((await json<{ result: { status: string } }>(res)).result.status).toBe("done");
    const types = (): string[] => receiver.received.map((request) => request.event.type);
    await until(
      async () => (types().includes("session.idle") && types().includes("job.finished") ? true : undefined),
      "job.finished and session.idle",
    );
    const job = receiver.received.find((request) => request.event.type === "job.finished")!;
    expect(job.event.data).toMatchObject({ session, conversationId: 1, status: "exited", exitCode: 0 });
    expect(typeof job.event.data["jobId"]).toBe("number");
    // One input, one answer, one idle session.
    expect(types().filter((type) => type === "input.completed")).toHaveLength(1);
    expect(types().filter((type) => type === "session.idle")).toHaveLength(1);
    const idle = receiver.received.find((request) => request.event.type === "session.idle")!;
    const completed = receiver.received.find((request) => request.event.type === "input.completed")!;
    expect(idle.event.data["seq"]).toBe(completed.event.data["seq"]);
  });

  it("a schedule occurrence is schedule.fired with the input it accepted", async () => {
    const receiver = new Receiver();
    const time = new ManualTime();
    setHostSeams({
      clock: () => new ManualClock(time),
      version: () => "v1",
      report: () => undefined,
      fetch: receiver.fetch,
    });
    const tenant = "events-schedules";
    const session = uniqueSession("schedule");
    const client = await token(tenant, "client");
    await registerEndpoint(tenant, { url: "https://receiver.test/schedules", events: ["schedule.fired"] });
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const t0 = time.now;
    const created = await json<{ id: number }>(
      await call("POST", `/v1/sessions/${session}/schedules`, {
        token: client,
        body: { input: "tick", every: 60_000 },
      }),
    );
    expect(receiver.received).toHaveLength(0);
    await runInDurableObject(
      stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>,
      (instance: SessionObject) => clockOf(instance).advanceTo(t0 + 60_000),
    );
    await until(async () => (receiver.received.length > 0 ? true : undefined), "schedule.fired");
    const view = await json<{ runs: number; lastInputId: number }>(
      await call("GET", `/v1/sessions/${session}/schedules/${created.id}`, { token: client }),
    );
    expect(view.runs).toBe(1);
    expect(receiver.received.map((request) => request.event.type)).toEqual(["schedule.fired"]);
    expect(receiver.received[0]?.event.data).toMatchObject({
      session,
      scheduleId: created.id,
      conversationId: 1,
      occurrence: t0 + 60_000,
      inputId: view.lastInputId,
    });
  });

  it("an approval and a client tool's call are pending.created and pending.resolved, with how each went", async () => {
    const receiver = new Receiver();
    setHostSeams({ fetch: receiver.fetch });
    const tenant = "events-pending";
    const session = uniqueSession("pending");
    const client = await token(tenant, "client");
    const operator = await token(tenant, "operator");
    await registerEndpoint(tenant, {
      url: "https://receiver.test/pending",
      events: ["pending.created", "pending.resolved"],
    });
    const tool = {
      description: "Ask the user for a colour",
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      handler: { type: "client" },
      approval: "always",
    };
    expect((await call("PUT", "/v1/tools/pick_colour", { token: operator, body: tool })).status).toBe(201);
    expect(
      (await call("PUT", `/v1/sessions/${session}`, { token: client, body: { selectedTools: ["pick_colour"] } }))
        .status,
    ).toBe(201);
    expect(
      (
        await call("POST", `/v1/sessions/${session}/conversations/root/inputs`, {
          token: client,
          body: { input: '/call pick_colour {"id":1}' },
        })
      ).status,
    ).toBe(201);
    type Item = { id: string; type: string };
    const itemOf = async (type: string): Promise<Item> =>
      until(
        async () =>
          (
            await json<{ items: Item[] }>(await call("GET", `/v1/sessions/${session}/pending`, { token: client }))
          ).items.find((item) => item.type === type),
        type,
      );
    const approval = await itemOf("approval");
    expect(
      (await call("POST", `/v1/sessions/${session}/pending/${approval.id}`, { token: client, body: { approve: true } }))
        .status,
    ).toBe(200);
    const output = await itemOf("client_tool");
    expect(
      (await call("POST", `/v1/sessions/${session}/pending/${output.id}`, { token: client, body: { output: "teal" } }))
        .status,
    ).toBe(200);
    await until(async () => (receiver.received.length >= 4 ? true : undefined), "four pending events");
    const events = receiver.received.map((request) => request.event);
    expect(events.map((event) => [event.type, event.data["pendingId"]])).toEqual([
      ["pending.created", approval.id],
      // The approval's answer and the client tool's item are one commit.
      ["pending.created", output.id],
      ["pending.resolved", approval.id],
      ["pending.resolved", output.id],
    ]);
    expect(events[2]?.data).toMatchObject({
      session,
      type: "approval",
      name: "pick_colour",
      conversationId: 1,
      outcome: "answered",
    });
    expect(events[3]?.data).toMatchObject({ session, type: "client_tool", outcome: "answered" });
    expect(events[1]?.data["seq"]).toBe(events[2]?.data["seq"]);
  });
});
