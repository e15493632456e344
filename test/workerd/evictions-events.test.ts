/**
 * Events out across evictions (docs/integrations.md "Events out"): a short turn script in a session of
 * a tenant with an endpoint for every event type, run once uninterrupted and then killed right after
 * each commit k (eviction-harness.ts `runScenario`: reopened by the alarm alone). At the end, with every
 * delivery driven to done by the alarm:
 *
 * - every event in the session's outbox was delivered at least once, and each at most once per kill more;
 * - every delivered event is in the durable outbox: a step the kill rolled back has no event;
 * - every delivered `input.completed` matches its input's durable terminal result;
 * - each accepted input has exactly one `input.completed`, as in the uninterrupted run.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Harness } from "../../src/core/harness.js";
import { priorAcceptance, queueInput, type InputResult } from "../../src/core/inbox.js";
import { bind } from "../../src/core/state.js";
import { acceptInput } from "../../src/kinds/placement.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { outboxList, type OutboxEvent } from "../../src/worker/outbox/types.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { acceptanceOf, resultOf, runScenario, type Scenario } from "./eviction-harness.js";
import { Receiver, registerEndpoint, verifyAt, type Registered } from "./event-fixtures.js";
import { call, clockOf, harnessOf, ManualClock, ManualTime, until, type TestSession } from "./session-fixtures.js";

const TENANT = "evict-events";
let receiver: Receiver;
let time: ManualTime;
let endpoint: Registered;

beforeEach(async () => {
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
  setHostSeams({});
  await abortAllDurableObjects();
});

interface Step {
  readonly key: string;
  readonly input: string;
  readonly followUp?: string;
}

const STEPS: readonly Step[] = [
  { key: "p0", input: "turn 0" },
  { key: "p1", input: '/call echo {"text":"tool 1"}', followUp: "follow 1" },
  { key: "p2", input: "turn 2" },
];

/** The request keys whose inputs must each report one input.completed. */
const KEYS = STEPS.flatMap((step) => [step.key, ...(step.followUp === undefined ? [] : [`${step.key}:f`])]);

async function submit(h: Harness, step: Step): Promise<void> {
  await h.commitBound(call, { conversationId: h.rootId }, async (b) => {
    if ((await priorAcceptance(b, step.key)) !== undefined) return;
    await acceptInput(b, h.rootId, { input: step.input, requestId: step.key }, defaultTurnOptions, h.now());
    if (step.followUp !== undefined)
      queueInput(b, h.rootId, { mode: "followUp", input: step.followUp, requestId: `${step.key}:f` });
  });
}

/** Deliveries of the session still pending (host bookkeeping, src/worker/outbox/book.ts). */
function pendingDeliveries(session: TestSession): Promise<number> {
  return runInDurableObject(session.stub, (_instance, state) =>
    state.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'host_deliveries'").toArray().length === 0
      ? 0
      : Number(state.storage.sql.exec("SELECT count(*) AS n FROM host_deliveries WHERE status = 'pending'").one()["n"]),
  );
}

/**
 * Until no task is live and no delivery is pending: sleepers and the outbox are woken by the alarm on the manual clock.
 */
async function quiesce(session: TestSession): Promise<void> {
  for (let round = 0; round < 60; round++) {
    await until(async () => !(await session.rpc.inspect()).busy, "no invocation busy");
    const inspection = await session.rpc.inspect();
    const pending = await pendingDeliveries(session);
    const live = inspection.start.length + inspection.inflight.length;
    if (live === 0 && pending === 0) return;
    const armed = await runInDurableObject(session.stub, (_instance, state) => state.storage.getAlarm());
    if (armed === null) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      continue;
    }
    const wake = Math.max(time.now, inspection.nextWake ?? 0);
    await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
    await runDurableObjectAlarm(session.stub);
  }
  throw new Error("the session never became quiescent");
}

interface Outcome {
  /** Request key -> the status its one input.completed reported. */
  readonly completed: Readonly<Record<string, string>>;
}

function scenario(name: string, kills: { count: number }): Scenario<Step, Outcome> {
  return {
    config: { model: "echo", selectedTools: ["echo"] },
    tenant: TENANT,
    steps: STEPS,
    submit: (session, step) =>
      runInDurableObject(session.stub, (instance: SessionObject) => submit(harnessOf(instance), step)),
    quiesce: (session) => quiesce(session),
    beforeAbort: () => {
      kills.count += 1;
    },
    checkReopened: async (session) => {
      // Nothing left pending without an alarm: quiesce drove every delivery to an end.
      expect(await pendingDeliveries(session)).toBe(0);
    },
    checkEnd: async (session) => {
      return runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        const outbox = (await h.storage.readList<OutboxEvent>(bind(outboxList, {}), { limit: 1000 })).items.map(
          (item) => item.value,
        );
        const mine = receiver.received.filter((request) => request.event.data["session"] === name);
        const delivered = new Map<string, number>();
        for (const request of mine) {
          expect(verifyAt(time.now, endpoint.secret, request)).toEqual(request.event);
          delivered.set(request.event.id, (delivered.get(request.event.id) ?? 0) + 1);
        }
        // Every committed event was delivered, at most once more per kill.
        for (const event of outbox) {
          expect(delivered.get(event.id) ?? 0, `${event.type} ${event.id} delivered`).toBeGreaterThanOrEqual(1);
          expect(delivered.get(event.id) ?? 0).toBeLessThanOrEqual(1 + kills.count);
        }
        // Nothing was delivered that is not durable (no event of a rolled-back step).
        const durable = new Set(outbox.map((event) => event.id));
        for (const id of delivered.keys()) expect(durable.has(id), `delivered ${id} is durable`).toBe(true);
        // Each input.completed matches its durable terminal result; one per input.
        const completed: Record<string, string> = {};
        for (const key of KEYS) {
          const acceptance = await acceptanceOf(h, key);
          expect(acceptance, key).toBeDefined();
          if (acceptance === undefined) continue;
          const result = (await resultOf(h, acceptance)) as InputResult | undefined;
          const events = outbox.filter(
            (event) => event.type === "input.completed" && event.data["inputId"] === acceptance.inputId,
          );
          expect(events, `input.completed of ${key}`).toHaveLength(1);
          const data = events[0]?.data ?? {};
          expect(data["status"]).toBe(result?.status);
          if (result?.status === "done") expect(data["answerEntryId"]).toBe(result.answer);
          completed[key] = String(data["status"]);
        }
        // One idle per step: a followUp placed at the answer continues the turn, so no idle in between.
        expect(outbox.filter((event) => event.type === "session.idle")).toHaveLength(STEPS.length);
        return { completed };
      });
    },
  };
}

describe("events out across evictions", () => {
  it("Events survive eviction at every commit boundary", { timeout: 300_000 }, async () => {
    endpoint = await registerEndpoint(TENANT, {
      url: "https://receiver.test/all",
      events: [
        "input.completed",
        "turn.failed",
        "session.idle",
        "schedule.fired",
        "job.finished",
        "rig.escalation",
        "delivery.disabled",
      ],
    });
    const baseline = await runScenario(scenario("events-baseline", { count: 0 }), "events-baseline");
    expect(baseline.commits).toBeGreaterThan(5);
    expect(Object.values(baseline.completed)).toEqual(KEYS.map(() => "done"));
    for (let k = 1; k <= baseline.commits; k++) {
      const kills = { count: 0 };
      const run = await runScenario(scenario(`events-${k}`, kills), `events-${k}`, k);
      expect({ k, completed: run.completed }).toEqual({ k, completed: baseline.completed });
    }
    console.log(`events eviction sweep: every one of ${baseline.commits} commit boundaries`);
  });
});
