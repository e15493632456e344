/**
 * Events out through a partial outage (docs/integrations.md "Events out"): the tenant's directory that
 * cannot be read is an outage, never "no endpoints" (deliveries stay pending, commits keep their events
 * and learn their endpoints once it answers), and a kill right after the directory disabled a failing
 * endpoint still sends `delivery.disabled`. The receiver stands behind the host's fetch seam; the
 * directory fails where it is called (its RPC methods, replaced on the class the objects of this
 * isolate run), and a kill is the platform's own `abortAllDurableObjects`.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DirectoryObject } from "../../src/worker/directory/object.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { clockOf, ManualClock, ManualTime } from "./session-fixtures.js";
import { call, json, stubOf, token, uniqueSession, until } from "./http-fixtures.js";
import { Receiver, registerEndpoint, verifyAt } from "./event-fixtures.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let receiver: Receiver;
let time: ManualTime;

beforeEach(() => {
  receiver = new Receiver();
  time = new ManualTime();
  setHostSeams({
    clock: () => new ManualClock(time),
    version: () => "v1",
    report: () => undefined,
    fetch: receiver.fetch,
  });
});

afterEach(async () => {
  vi.restoreAllMocks();
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
  lastError?: string;
  nextAttemptAt: string | null;
}

/** The session's tenant directory stops answering its endpoint reads (until the spy is restored). */
function directoryUnreadable(): { restore: () => void } {
  const spy = vi.spyOn(DirectoryObject.prototype, "sessionEndpoints").mockImplementation(() => {
    throw new Error("the directory is overloaded");
  });
  return { restore: () => spy.mockRestore() };
}

function helpers(tenant: string, session: string, client: string, op: string) {
  const stub = (): DurableObjectStub<SessionObject> =>
    stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>;
  return {
    stub,
    advance: (ms: number): Promise<void> =>
      runInDurableObject(stub(), (instance: SessionObject) => clockOf(instance).advanceTo(ms)),
    deliveries: async (status?: string): Promise<Delivery[]> =>
      (
        await json<{ items: Delivery[] }>(
          await call("GET", `/v1/sessions/${session}/deliveries${status === undefined ? "" : `?status=${status}`}`, {
            token: op,
          }),
        )
      ).items,
    input: async (text: string): Promise<number> => {
      const res = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
        token: client,
        body: { input: text },
      });
      expect(res.status).toBe(201);
      const body = await json<{ inputId: number; result: { status: string } }>(res);
      expect(body.result.status).toBe("done");
      return body.inputId;
    },
  };
}

describe("events out through a directory outage", () => {
  it("An unreadable directory loses no delivery and no event", async () => {
    const tenant = "outage-read";
    const session = uniqueSession("outage");
    const client = await token(tenant, "client");
    const op = await token(tenant, "operator");
    const { stub, advance, deliveries, input } = helpers(tenant, session, client, op);
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const endpoint = await registerEndpoint(tenant, { url: "https://outage.test/hook", events: ["input.completed"] });

    // A delivery waits for its retry when the object restarts.
    receiver.replies.set(endpoint.url, 503);
    const first = await input("before the outage");
    const [waiting] = await deliveries("pending");
    expect(waiting).toMatchObject({ endpointId: endpoint.id, status: "pending", attempts: 1 });
    await abortAllDurableObjects();
    receiver.replies.set(endpoint.url, 200);

    // The fresh instance cannot read the directory: the retry falls due, and two steps commit (within 30 s).
    const outage = directoryUnreadable();
    await advance(Date.parse(waiting?.nextAttemptAt ?? ""));
    await runDurableObjectAlarm(stub());
    const second = await input("during the outage");
    const third = await input("still during the outage");
    for (let i = 0; i < 3; i++) {
      await advance(time.now + 10_000);
      await runDurableObjectAlarm(stub());
    }
    // Nothing was sent, and nothing was given up: the waiting delivery is pending, not dead.
    expect(receiver.to(endpoint.url)).toHaveLength(1);
    expect(await deliveries("dead")).toEqual([]);
    expect((await deliveries()).map((delivery) => [delivery.id, delivery.status])).toEqual([[waiting?.id, "pending"]]);

    // The directory answers again: every step's event goes out, the waiting one with its own id.
    outage.restore();
    for (let i = 0; i < 10 && receiver.to(endpoint.url).length < 4; i++) {
      await advance(time.now + 60_000);
      await runDurableObjectAlarm(stub());
    }
    const delivered = receiver.to(endpoint.url).filter((request) => request.status === 200);
    for (const request of delivered) expect(verifyAt(time.now, endpoint.secret, request)).toEqual(request.event);
    expect(delivered.map((request) => request.event.data["inputId"])).toEqual([first, second, third]);
    expect(delivered[0]?.event.id).toBe(waiting?.eventId);
    const all = await deliveries();
    expect(all.map((delivery) => delivery.status)).toEqual(["done", "done", "done"]);
  });

  it("delivery.disabled survives a kill after the directory disabled the endpoint", async () => {
    const tenant = "outage-disable";
    const session = uniqueSession("disable");
    const client = await token(tenant, "client");
    const op = await token(tenant, "operator");
    const { stub, advance, deliveries, input } = helpers(tenant, session, client, op);
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const failing = await registerEndpoint(tenant, { url: "https://failing.test/hook", events: ["input.completed"] });
    const watcher = await registerEndpoint(tenant, { url: "https://watcher.test/hook", events: ["delivery.disabled"] });
    receiver.replies.set(failing.url, 500);
    const t0 = time.now;
    await input("fails for a day");
    expect(await deliveries("pending")).toHaveLength(1);

    // The directory disables the endpoint, the answer never gets back, and the object is killed.
    const disable = DirectoryObject.prototype.disableEndpoint;
    const spy = vi.spyOn(DirectoryObject.prototype, "disableEndpoint").mockImplementation(function (
      this: DirectoryObject,
      ...args: Parameters<DirectoryObject["disableEndpoint"]>
    ) {
      disable.apply(this, args);
      throw new Error("the connection was lost");
    });
    await advance(t0 + DAY + HOUR);
    expect(await runDurableObjectAlarm(stub())).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    await abortAllDurableObjects();
    spy.mockRestore();
    const endpoint = await json<{ enabled: boolean }>(
      await call("GET", `/v1/webhook-endpoints/${failing.id}`, { token: op }),
    );
    expect(endpoint.enabled).toBe(false);

    // The fresh instance (opened by the alarm the runtime retries, or the next request) goes on.
    for (let i = 0; i < 5 && receiver.to(watcher.url).length === 0; i++) {
      if (!(await runDurableObjectAlarm(stub()))) await deliveries();
      await advance(time.now + 2 * 60_000);
    }
    const notices = receiver.to(watcher.url);
    expect(notices).toHaveLength(1);
    const notice = notices[0]!;
    expect(verifyAt(time.now, watcher.secret, notice)).toEqual(notice.event);
    expect(notice.event).toMatchObject({
      type: "delivery.disabled",
      data: { session, endpointId: failing.id, lastStatusCode: 500, failingSince: new Date(t0).toISOString() },
    });
    // The failing endpoint's delivery ended, and the notice was delivered once.
    expect((await deliveries()).map((delivery) => [delivery.endpointId, delivery.status])).toEqual([
      [watcher.id, "done"],
      [failing.id, "dead"],
    ]);
  });
});
