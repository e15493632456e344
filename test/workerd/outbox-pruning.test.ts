/**
 * Pruning of events out (docs/integrations.md "What events cost"): a session that emits far more than
 * one prune commit's worth of events an hour keeps its outbox bounded. The events are committed straight
 * into the session's outbox through its harness (as its commits write them), 10,000 an hour for a day
 * on the manual clock, to an endpoint the operator disabled (so each delivery ends dead at once, the
 * cheapest finished row); the retention is shortened through the outbox's timing seam, and the session
 * object runs only the alarms that fall due.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { bind } from "../../src/core/state.js";
import { setOutboxTimingSeam } from "../../src/worker/outbox/outbox.js";
import { outboxList, type OutboxEvent } from "../../src/worker/outbox/types.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { clockOf, harnessOf, ManualClock, ManualTime } from "./session-fixtures.js";
import { call, stubOf, token, uniqueSession } from "./http-fixtures.js";
import { Receiver, registerEndpoint } from "./event-fixtures.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const RETENTION = 2 * HOUR;
const PER_HOUR = 10_000;
const STEPS_PER_HOUR = 10;

let time: ManualTime;

beforeEach(() => {
  time = new ManualTime();
  setHostSeams({
    clock: () => new ManualClock(time),
    version: () => "v1",
    report: () => undefined,
    fetch: new Receiver().fetch,
  });
  setOutboxTimingSeam({ retentionMs: RETENTION });
});

afterEach(async () => {
  setHostSeams({});
  setOutboxTimingSeam(undefined);
  await abortAllDurableObjects();
});

describe("outbox pruning", () => {
  it("Outbox pruning keeps up with a busy session", { timeout: 600_000 }, async () => {
    const tenant = "outbox-prune";
    const session = uniqueSession("busy");
    const client = await token(tenant, "client");
    const operator = await token(tenant, "operator");
    const stub = (): DurableObjectStub<SessionObject> =>
      stubOf(tenant, session) as unknown as DurableObjectStub<SessionObject>;
    expect((await call("PUT", `/v1/sessions/${session}`, { token: client, body: {} })).status).toBe(201);
    const endpoint = await registerEndpoint(tenant, { url: "https://busy.test/hook", events: ["input.completed"] });
    expect(
      (await call("PATCH", `/v1/webhook-endpoints/${endpoint.id}`, { token: operator, body: { enabled: false } }))
        .status,
    ).toBe(200);

    let n = 0;
    const emit = (count: number): Promise<void> =>
      runInDurableObject(stub(), async (instance: SessionObject) => {
        const harness = harnessOf(instance);
        const now = harness.now();
        await harness.commit((tx) => {
          for (let i = 0; i < count; i++) {
            n += 1;
            const event: OutboxEvent = {
              id: `evt_busy_${n}`,
              type: "input.completed",
              timestamp: now,
              data: { session, seq: 0, inputId: n },
              to: [endpoint.id],
            };
            tx.list(outboxList).append(event);
          }
        }, BACKGROUND_CONTEXT);
      });
    /** Run the alarms that are due by now, as the platform would. */
    const alarms = async (): Promise<void> => {
      for (let i = 0; i < 10; i++) {
        const armed = await runInDurableObject(stub(), (_instance, state) => state.storage.getAlarm());
        if (armed === null || armed > time.now) return;
        await runDurableObjectAlarm(stub());
      }
    };
    const oldest = (): Promise<{ at: number | undefined; rows: number }> =>
      runInDurableObject(stub(), async (instance: SessionObject, state) => {
        const head = await harnessOf(instance).storage.readList<OutboxEvent>(bind(outboxList, {}), { limit: 1 });
        const rows = Number(state.storage.sql.exec("SELECT count(*) AS n FROM host_deliveries").one()["n"]);
        return { at: head.items[0]?.value.timestamp, rows };
      });

    const t0 = time.now;
    for (let step = 1; step <= 24 * STEPS_PER_HOUR; step++) {
      await runInDurableObject(stub(), (instance: SessionObject) =>
        clockOf(instance).advanceTo(t0 + (step * HOUR) / STEPS_PER_HOUR),
      );
      await emit(PER_HOUR / STEPS_PER_HOUR);
      await alarms();
      // Nothing older than the retention window stays more than an hour, events nor delivery rows.
      const { at, rows } = await oldest();
      expect(at, `the oldest event after ${step / STEPS_PER_HOUR} h`).toBeGreaterThanOrEqual(
        time.now - RETENTION - HOUR,
      );
      expect(rows).toBeLessThanOrEqual(((RETENTION + HOUR) / HOUR) * PER_HOUR + PER_HOUR / STEPS_PER_HOUR);
    }
    expect(n).toBe(24 * PER_HOUR);
  });
});
