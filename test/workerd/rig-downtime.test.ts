/**
 * "Patrol after downtime" in a Durable Object (seed 002 "Witness Restart"): the
 * witness patrol's alarm is set, the object is evicted, the shared manual clock moves 3 h ahead, and only
 * the alarm runs (runDurableObjectAlarm). It reopens the session, the witness runs exactly one patrol (no
 * backlog of the 36 it missed) and the next patrol, and the alarm, are one interval after now.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bind } from "../../src/core/state.js";
import type { Actor } from "../../src/rig/index.js";
import { witnessPatrol, witnessTask } from "../../src/rig/state.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { harnessOf, installSeams, ok, resetSeams, TestSession, until, type Seams } from "./session-fixtures.js";

const MIN = 60_000;
const mayor: Actor = { role: "mayor" };
const polecat: Actor = { role: "agent", agent: "polecat-alpha" };
let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

describe("Patrol after downtime", () => {
  it("the witness's alarm fires 3 h late after an eviction: exactly one patrol, no backlog, the next one interval after now", async () => {
    const session = new TestSession("rig-downtime");
    await session.rpc.create();
    const t0 = seams.time.now;
    await ok(session.rpc.op("rigRegister", mayor, "polecat-alpha", { role: "polecat" }));
    await ok(
      session.rpc.op("rigTransition", mayor, "polecat-alpha", "set", {
        work: { bead_id: "gt-abc12", title: "Add README section" },
      }),
    );
    await ok(session.rpc.op("rigTransition", polecat, "polecat-alpha", "activate", {}));

    const witness = () =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        const taskId = (await h.storage.getValue(bind(witnessTask, {})))?.value;
        const task = taskId === undefined ? undefined : (await h.storage.getTasks([taskId])).get(taskId);
        const patrol = (await h.storage.getValue(bind(witnessPatrol, {})))?.value;
        return {
          state: task?.state as { status: string; next_patrol_at: number } | undefined,
          patrols: patrol?.patrols ?? 0,
        };
      });
    const alarm = () => runInDurableObject(session.stub, (_instance, state) => state.storage.getAlarm());
    // The witness sleeps to its first patrol: the session's one alarm is that wake time, not a heartbeat.
    await until(async () => (await alarm()) === t0 + 5 * MIN, "the patrol alarm");
    expect(await witness()).toMatchObject({ state: { next_patrol_at: t0 + 5 * MIN }, patrols: 0 });

    // Evicted; three hours pass; only the alarm runs.
    await abortAllDurableObjects();
    const late = t0 + 180 * MIN;
    seams.time.now = late;
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    await until(async () => (await witness()).patrols >= 1, "the patrol after downtime");
    await until(async () => (await alarm()) === late + 5 * MIN, "the next patrol's alarm");
    const after = await witness();
    expect(after).toMatchObject({ state: { status: "patrolling", next_patrol_at: late + 5 * MIN }, patrols: 1 });
    // One stall, classified by its real age: one mail, no flood.
    const mail = (await ok(session.rpc.op("rigMail", mayor, {}))).messages;
    expect(mail.map((m) => m.payload).filter((p) => typeof p === "string" && p.startsWith("STALL_"))).toEqual([
      "STALL_ALERT: polecat-alpha idle 180m on gt-abc12",
    ]);
    // A second run of the same alarm (at-least-once delivery) at the same time patrols nothing more.
    await runDurableObjectAlarm(session.stub);
    expect((await witness()).patrols).toBe(1);
  });
});
