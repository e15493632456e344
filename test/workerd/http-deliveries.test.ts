/**
 * Delivery of events out on a manual clock (docs/integrations.md "Events out"): a failing endpoint is
 * retried on the backoff table with at most 20 % jitter, its delivery dies after the retry window, the
 * endpoint is disabled after failing for the disable window (and a `delivery.disabled` event goes to the
 * endpoints subscribed to it), and an operator recovers it: PATCH enabled, then retry the dead delivery.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HostReport } from "../../src/worker/platform/host-config.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { BACKOFF_JITTER, BACKOFF_MS } from "../../src/worker/outbox/sender.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { clockOf, ManualClock, ManualTime } from "./session-fixtures.js";
import { call, json, stubOf, token, uniqueSession } from "./http-fixtures.js";
import { Receiver, registerEndpoint, verifyAt } from "./event-fixtures.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let receiver: Receiver;
let time: ManualTime;
let reports: HostReport[];

beforeEach(() => {
  receiver = new Receiver();
  time = new ManualTime();
  reports = [];
  setHostSeams({
    clock: () => new ManualClock(time),
    version: () => "v1",
    report: (report) => reports.push(report),
    fetch: receiver.fetch,
  });
});

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

interface Delivery {
  id: string;
  eventId: string;
  endpointId: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  nextAttemptAt: string | null;
}

describe("deliveries", () => {
  it("A failing endpoint is retried with backoff, then disabled, and recovers after retry", async () => {
    const tenant = "deliveries-fail";
    const session = uniqueSession("failing");
    const client = await token(tenant, "client");
    const op = await token(tenant, "operator");
    const stub = stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>;
    const advance = (ms: number): Promise<void> =>
      runInDurableObject(stub, (instance: SessionObject) => clockOf(instance).advanceTo(ms));
    const deliveries = async (status?: string): Promise<Delivery[]> =>
      (
        await json<{ items: Delivery[] }>(
          await call("GET", `/v1/sessions/${session}/deliveries${status === undefined ? "" : `?status=${status}`}`, {
            token: op,
          }),
        )
      ).items;
    const input = async (text: string): Promise<void> => {
      expect(
        (
          await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
            token: client,
            body: { input: text },
          })
        ).status,
      ).toBe(201);
    };

    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const failing = await registerEndpoint(tenant, { url: "https://failing.test/hook", events: ["input.completed"] });
    const watcher = await registerEndpoint(tenant, { url: "https://watcher.test/hook", events: ["delivery.disabled"] });
    receiver.replies.set(failing.url, 500);
    const t0 = time.now;

    await input("first");
    // The first attempt goes out right after the commit, and fails.
    let [pending] = await deliveries("pending");
    expect(pending).toMatchObject({
      endpointId: failing.id,
      type: "input.completed",
      status: "pending",
      attempts: 1,
      lastStatusCode: 500,
    });
    expect(receiver.to(failing.url)).toHaveLength(1);

    // Each wait is the table's step plus at most 20 %, then hourly, until the retry window ends.
    let attemptAt = t0;
    const gaps: number[] = [];
    for (let i = 0; i < 60 && pending !== undefined; i++) {
      const next = Date.parse(pending.nextAttemptAt ?? "");
      gaps.push(next - attemptAt);
      await advance(next);
      attemptAt = next;
      expect(await runDurableObjectAlarm(stub)).toBe(true);
      const attempts = pending.attempts;
      [pending] = await deliveries("pending");
      if (pending !== undefined) expect(pending.attempts).toBe(attempts + 1);
    }
    gaps.forEach((gap, index) => {
      const base = BACKOFF_MS[Math.min(index, BACKOFF_MS.length - 1)] as number;
      expect(gap, `wait after attempt ${index + 1}`).toBeGreaterThanOrEqual(base);
      expect(gap, `wait after attempt ${index + 1}`).toBeLessThanOrEqual(base * (1 + BACKOFF_JITTER));
    });
    expect(attemptAt - t0).toBeLessThanOrEqual(DAY);
    const [dead] = await deliveries("dead");
    expect(dead).toMatchObject({ endpointId: failing.id, status: "dead", lastStatusCode: 500, nextAttemptAt: null });
    expect(dead?.attempts).toBe(gaps.length + 1);
    expect(receiver.to(failing.url)).toHaveLength(gaps.length + 1);

    // Failing for the disable window: the endpoint is disabled (by the alarm that comes after), and the watcher hears
    // of it.
    for (let i = 0; i < 5 && receiver.to(watcher.url).length === 0; i++) {
      await advance(Math.max(time.now + HOUR, t0 + DAY));
      await runDurableObjectAlarm(stub);
    }
    const endpoint = await json<{ enabled: boolean; disabledReason?: string }>(
      await call("GET", `/v1/webhook-endpoints/${failing.id}`, { token: op }),
    );
    expect(endpoint.enabled).toBe(false);
    expect(endpoint.disabledReason).toMatch(/failed for 24 h/);
    const notices = receiver.to(watcher.url);
    expect(notices).toHaveLength(1);
    const notice = notices[0]!;
    expect(verifyAt(time.now, watcher.secret, notice)).toEqual(notice.event);
    expect(notice.event).toMatchObject({
      type: "delivery.disabled",
      data: { session, endpointId: failing.id, lastStatusCode: 500 },
    });

    // A disabled endpoint gets nothing, and its dead delivery cannot be retried until it is enabled.
    const sentBefore = receiver.to(failing.url).length;
    await input("second");
    await runDurableObjectAlarm(stub);
    expect(receiver.to(failing.url)).toHaveLength(sentBefore);
    const refused = await call("POST", `/v1/sessions/${session}/deliveries/${dead?.id}/retry`, { token: op });
    expect(refused.status).toBe(409);
    expect(await json(refused)).toMatchObject({ code: "endpoint_disabled" });
    expect((await call("POST", `/v1/sessions/${session}/deliveries/${dead?.id}/retry`, { token: client })).status).toBe(
      403,
    );
    expect(
      (await call("POST", `/v1/sessions/${session}/deliveries/1.we_aaaaaaaaaaaaaaaa/retry`, { token: op })).status,
    ).toBe(404);

    // The receiver heals; the operator enables the endpoint and retries the dead delivery.
    receiver.replies.set(failing.url, 200);
    expect(
      await json(await call("PATCH", `/v1/webhook-endpoints/${failing.id}`, { token: op, body: { enabled: true } })),
    ).toMatchObject({ enabled: true });
    const retried = await json<Delivery>(
      await call("POST", `/v1/sessions/${session}/deliveries/${dead?.id}/retry`, { token: op }),
    );
    expect(retried).toMatchObject({
      id: dead?.id,
      status: "done",
      attempts: (dead?.attempts ?? 0) + 1,
      lastStatusCode: 200,
    });
    const redelivered = receiver.to(failing.url).at(-1)!;
    expect(redelivered.event.id).toBe(dead?.eventId);
    expect(verifyAt(time.now, failing.secret, redelivered)).toEqual(redelivered.event);

    // And the next event is delivered.
    await input("third");
    const last = receiver.to(failing.url).at(-1)!;
    expect(last.event).toMatchObject({ type: "input.completed", data: { session, status: "done" } });
    expect(last.status).toBe(200);
  });

  it("rotate-secret: both signatures for 24 h", async () => {
    const tenant = "deliveries-rotate";
    const session = uniqueSession("rotate");
    const client = await token(tenant, "client");
    const op = await token(tenant, "operator");
    const stub = stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>;
    const endpoint = await registerEndpoint(tenant, { url: "https://rotate.test/hook", events: ["input.completed"] });
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const rotated = await json<{ secret: string; previousSecretExpiresAt: string }>(
      await call("POST", `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { token: op }),
    );
    expect(Date.parse(rotated.previousSecretExpiresAt)).toBe(time.now + DAY);
    expect(
      (
        await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
          token: client,
          body: { input: "during" },
        })
      ).status,
    ).toBe(201);
    const during = receiver.to(endpoint.url).at(-1)!;
    expect(during.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    expect(verifyAt(time.now, rotated.secret, during)).toEqual(during.event);
    expect(verifyAt(time.now, endpoint.secret, during)).toEqual(during.event);

    // After 24 h only the new secret signs (the session reads the endpoint again: its copy is stale).
    await runInDurableObject(stub, (instance: SessionObject) => clockOf(instance).advanceTo(time.now + DAY + 1));
    expect(
      (
        await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
          token: client,
          body: { input: "after" },
        })
      ).status,
    ).toBe(201);
    const after = receiver.to(endpoint.url).at(-1)!;
    expect(after.event.id).not.toBe(during.event.id);
    expect(after.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(verifyAt(time.now, rotated.secret, after)).toEqual(after.event);
    expect(() => verifyAt(time.now, endpoint.secret, after)).toThrow();
  });
});
