/**
 * The session Durable Object (docs/design.md): creation, the alarm that multiplexes every reason to wake,
 * recovery after a kill, quarantine of a task that keeps killing the object, and the durable session
 * fault. Kills are `abortAllDurableObjects()` (eviction would wait for in-flight work); alarms run by
 * hand with `runDurableObjectAlarm` on a manual clock that starts a day ahead, so they never fire on
 * their own. Every test uses its own object.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { initialValue } from "../../src/core/harness.js";
import { conversationValue } from "../../src/core/state.js";
import { erase } from "../../src/core/task-kind.js";
import { SCHEMA_VERSION } from "../../src/storage/migrations.js";
import { sessionErrorCode } from "../../src/worker/errors.js";
import { DEFAULT_KILL_BOUND, HEARTBEAT_MS } from "../../src/worker/platform/host-config.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import {
  addTask,
  call,
  calls,
  clearLog,
  clockOf,
  contractKind,
  harnessOf,
  installKinds,
  installSeams,
  loopKind,
  resetSeams,
  retryKind,
  stuckKind,
  taskOf,
  until,
  waitForCalls,
  TestSession,
  type Seams,
} from "./session-fixtures.js";

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
  installKinds();
  clearLog();
});

afterEach(async () => {
  // Work left hanging in an object must not outlive its test.
  await abortAllDurableObjects();
  resetSeams();
});

const userTables =
  "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY name";

function alarmOf(session: TestSession): Promise<number | null> {
  return runInDurableObject(session.stub, (_instance, state) => state.storage.getAlarm());
}

function advanceTo(session: TestSession, ms: number): Promise<void> {
  return runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(ms));
}

async function statusOf(session: TestSession, id: number): Promise<string | undefined> {
  return (await taskOf(session, id))?.state.status;
}

async function untilStatus(session: TestSession, id: number, status: string): Promise<void> {
  await until(async () => (await statusOf(session, id)) === status, `task ${id} reaches ${status}`);
}

/** Kill the object (in-flight work dies without warning) and run the alarm that brings it back. */
async function killAndWake(session: TestSession): Promise<void> {
  await abortAllDurableObjects();
  expect(await runDurableObjectAlarm(session.stub)).toBe(true);
}

describe("SessionObject creation", () => {
  it("a never-created session answers not found to every operation, writes nothing and has no tables", async () => {
    const session = new TestSession("never-created");
    expect(await session.rpc.exists()).toBe(false);
    const operations: Array<() => Promise<unknown>> = [
      () => session.rpc.inspect(),
      () => session.rpc.abortTask(2),
      () => session.rpc.shutdown(),
      () => session.rpc.clearFault(),
      () => session.rpc.releaseQuarantine(2),
    ];
    for (const operation of operations) {
      const error = await operation().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(sessionErrorCode(error)).toBe("not_found");
    }
    await runInDurableObject(session.stub, async (instance: SessionObject, state) => {
      await instance.alarm(); // a stray alarm on a never-created object does nothing either
      expect(state.storage.sql.exec(userTables).toArray()).toEqual([]);
      expect(await state.storage.getAlarm()).toBeNull();
      expect(instance.harness).toBeUndefined();
    });
  });

  it("create migrates the schema and commits the root with its initial values; a second create changes nothing", async () => {
    const session = new TestSession("create");
    const greeting = conversationValue<string>("test.greeting", { rewind: false });
    expect(await session.rpc.create({ rootValues: [initialValue(greeting, "hello")] })).toEqual({ created: true });
    expect(await session.rpc.exists()).toBe(true);
    expect(await session.rpc.create({ rootValues: [initialValue(greeting, "other")] })).toEqual({ created: false });
    await runInDurableObject(session.stub, async (instance: SessionObject, state) => {
      const root = await harnessOf(instance).root(call);
      expect(await root.value(greeting).get(call)).toBe("hello");
      // The root conversation, its greeting and the session's incarnation (src/kinds/incarnation.ts).
      expect(harnessOf(instance).storage.lastSeq).toBe(3);
      const tables = state.storage.sql
        .exec(userTables)
        .toArray()
        .map((row) => row["name"]);
      expect(tables).toEqual(expect.arrayContaining(["entries", "tasks", "host_kills", "host_fault"]));
      expect(
        state.storage.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").one()["value"],
      ).toBe(SCHEMA_VERSION);
    });
    const inspection = await session.rpc.inspect();
    expect(inspection.start).toEqual([]);
    expect(inspection.fault).toBeUndefined();
  });

  it("an existing session opened by newer code runs the newer migrations", async () => {
    const session = new TestSession("migrate-on-open");
    await session.rpc.create();
    // Make it look like a session written by code that knew only migration 1.
    await runInDurableObject(session.stub, (_instance, state) => {
      state.storage.sql.exec("DROP TABLE host_kills");
      state.storage.sql.exec("DROP TABLE host_fault");
      state.storage.sql.exec("DROP TABLE session_elements");
      state.storage.sql.exec("DROP INDEX entries_by_kind");
      state.storage.sql.exec("DROP INDEX tasks_live");
      state.storage.sql.exec("ALTER TABLE tasks DROP COLUMN settled");
      for (const table of ["entries", "tasks", "list_elements"])
        state.storage.sql.exec(`ALTER TABLE ${table} DROP COLUMN last`);
      state.storage.sql.exec("UPDATE session_metadata SET value = 1 WHERE name = 'schema_version'");
    });
    await abortAllDurableObjects();
    expect((await session.rpc.inspect()).kills).toEqual([]);
    await runInDurableObject(session.stub, (_instance, state) => {
      expect(
        state.storage.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").one()["value"],
      ).toBe(SCHEMA_VERSION);
      const tables = state.storage.sql
        .exec(userTables)
        .toArray()
        .map((row) => row["name"]);
      expect(tables).toEqual(expect.arrayContaining(["host_kills", "host_fault", "session_elements"]));
      const indexes = state.storage.sql
        .exec("SELECT name FROM sqlite_master WHERE type = 'index'")
        .toArray()
        .map((row) => row["name"]);
      expect(indexes).toContain("entries_by_kind");
    });
  });
});

describe("SessionObject alarm", () => {
  it("a task in a retry wait survives a kill and resumes at its wake time", async () => {
    const session = new TestSession("retry-wait");
    await session.rpc.create();
    const t0 = seams.time.now;
    const id = await addTask(session, retryKind, { status: "pending", delayMs: 60_000 });
    await untilStatus(session, id, "retry_wait");
    expect((await session.rpc.inspect()).nextWake).toBe(t0 + 60_000);

    await killAndWake(session); // the heartbeat alarm armed while it slept brings the object back
    await waitForCalls(id, 2);
    expect(calls(id).map((c) => [c.method, c.status])).toEqual([
      ["execute", "pending"],
      ["execute", "retry_wait"],
    ]);
    // execute sleeps only the remainder: not a moment before its durable wake time.
    expect((await session.rpc.inspect()).nextWake).toBe(t0 + 60_000);
    await advanceTo(session, t0 + 59_999);
    expect(await statusOf(session, id)).toBe("retry_wait");
    await advanceTo(session, t0 + 60_000);
    await untilStatus(session, id, "done");
    expect((await taskOf(session, id))?.state).toEqual({ status: "done", delayMs: 60_000, resumedAt: t0 + 60_000 });
    const inspection = await session.rpc.inspect();
    expect(inspection.kills).toEqual([]);
    expect(inspection.busy).toBe(false);
    expect(await alarmOf(session)).toBeNull();
  });

  it("an inflight task goes through recover after a kill", async () => {
    const session = new TestSession("recover");
    await session.rpc.create();
    const id = await addTask(session, stuckKind, { status: "pending", recovers: true });
    await untilStatus(session, id, "running");
    expect((await session.rpc.inspect()).kills).toEqual([{ taskId: id, kills: 1, version: "v1" }]);

    await killAndWake(session);
    await untilStatus(session, id, "done");
    expect(calls(id).map((c) => [c.method, c.status])).toEqual([
      ["execute", "pending"],
      ["recover", "running"],
    ]);
    expect((await taskOf(session, id))?.state).toEqual({ status: "done", recovers: true, by: "recover" });
    expect((await session.rpc.inspect()).kills).toEqual([]);
  });

  it("an alarm while work is in flight re-arms the heartbeat about 30 s ahead and starts nothing twice", async () => {
    const session = new TestSession("heartbeat");
    await session.rpc.create();
    const t0 = seams.time.now;
    const id = await addTask(session, stuckKind, { status: "pending", recovers: true });
    await untilStatus(session, id, "running");
    expect(await alarmOf(session)).toBe(t0 + HEARTBEAT_MS);

    await advanceTo(session, t0 + HEARTBEAT_MS);
    expect(await runDurableObjectAlarm(session.stub)).toBe(true); // returns although the execute never does
    expect(await alarmOf(session)).toBe(t0 + 2 * HEARTBEAT_MS);
    await runDurableObjectAlarm(session.stub); // at-least-once delivery: a repeated alarm is harmless
    expect(calls(id)).toHaveLength(1);
    expect((await session.rpc.inspect()).busy).toBe(true);
  });

  it("the number of alarm writes over a run equals the number of changes of the earliest wake", async () => {
    const session = new TestSession("alarm-writes");
    await session.rpc.create();
    const t0 = seams.time.now;
    const stats = () => runInDurableObject(session.stub, (instance: SessionObject) => instance.alarmStats);
    expect(await stats()).toMatchObject({ sets: 0, clears: 0, changes: 0 });

    // Earliest wake: heartbeat t0+30s (busy), then A's wake t0+10s.
    const a = await addTask(session, retryKind, { status: "pending", delayMs: 10_000 });
    await untilStatus(session, a, "retry_wait");
    expect(await alarmOf(session)).toBe(t0 + 10_000);
    // B sleeps until t0+20s: the earliest wake is unchanged, so nothing is written.
    const b = await addTask(session, retryKind, { status: "pending", delayMs: 20_000 });
    await untilStatus(session, b, "retry_wait");
    await until(
      async () => (await session.rpc.inspect()).nextWake === t0 + 10_000 && (await stats()).sets === 2,
      "B asleep",
    );
    expect(await stats()).toMatchObject({ sets: 2, clears: 0, changes: 2 });

    // A wakes: B's t0+20s is earliest. B wakes: its heartbeat t0+50s (a sleeper is not busy, so no
    // heartbeat ran while both slept). Both settle: no reason, no alarm.
    await advanceTo(session, t0 + 10_000);
    await untilStatus(session, a, "done");
    expect(await alarmOf(session)).toBe(t0 + 20_000);
    await advanceTo(session, t0 + 20_000);
    await untilStatus(session, b, "done");
    await until(async () => !(await session.rpc.inspect()).busy, "idle");
    expect(await alarmOf(session)).toBeNull();
    const final = await stats();
    // Five changes of the earliest wake: t0+30s, t0+10s, t0+20s, t0+50s, none.
    expect(final).toMatchObject({ sets: 4, clears: 1, changes: 5 });
    expect(final.sets + final.clears).toBe(final.changes);
  });

  it("an alarm whose session cannot open reports the failure and does not throw at the runtime", async () => {
    const session = new TestSession("alarm-fails");
    await session.rpc.create();
    await runInDurableObject(session.stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE session_metadata SET value = ? WHERE name = 'schema_version'", SCHEMA_VERSION + 1);
    });
    await abortAllDurableObjects();
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      await expect(instance.alarm()).resolves.toBeUndefined();
    });
    expect(seams.reports.some((report) => report.type === "alarm_failed")).toBe(true);
  });
});

describe("SessionObject quarantine", () => {
  it(`a task that kills the object every time is quarantined after ${DEFAULT_KILL_BOUND} kills, and an operator abort settles it through its abort handler`, async () => {
    const session = new TestSession("quarantine");
    await session.rpc.create();
    const id = await addTask(session, stuckKind, { status: "pending", recovers: false });
    await waitForCalls(id, 1);
    for (let kill = 1; kill < DEFAULT_KILL_BOUND; kill += 1) {
      await killAndWake(session);
      await waitForCalls(id, kill + 1);
    }
    await killAndWake(session); // the bound is reached: recover is withheld

    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined.map((task) => task.id)).toEqual([id]);
    expect(inspection.kills).toEqual([{ taskId: id, kills: DEFAULT_KILL_BOUND, version: "v1" }]);
    expect(inspection.busy).toBe(false);
    expect(calls(id).map((c) => c.method)).toEqual(["execute", "recover", "recover"]);
    expect(seams.reports).toContainEqual({
      type: "quarantined",
      taskId: id,
      kind: "test.stuck",
      kills: DEFAULT_KILL_BOUND,
    });
    expect(await alarmOf(session)).toBeNull(); // a quarantined task does not keep waking the object

    await session.rpc.abortTask(id);
    await untilStatus(session, id, "aborted");
    expect(calls(id).map((c) => c.method)).toEqual(["execute", "recover", "recover", "abort"]);
    const after = await session.rpc.inspect();
    expect(after.quarantined).toEqual([]);
    expect(after.kills).toEqual([]);
  });

  it("a quarantined task stays withheld in a fresh instance, and releasing it starts recover again", async () => {
    const session = new TestSession("release");
    await session.rpc.create();
    const id = await addTask(session, stuckKind, { status: "pending", recovers: false });
    await waitForCalls(id, 1);
    for (let kill = 1; kill <= DEFAULT_KILL_BOUND; kill += 1) await killAndWake(session);
    await abortAllDurableObjects();
    expect((await session.rpc.inspect()).quarantined.map((task) => task.id)).toEqual([id]);
    expect(calls(id)).toHaveLength(DEFAULT_KILL_BOUND);

    await session.rpc.releaseQuarantine(id);
    await waitForCalls(id, DEFAULT_KILL_BOUND + 1);
    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.kills).toEqual([{ taskId: id, kills: 1, version: "v1" }]);
  });

  it("a task with many normal invocations (retry cycles, loops back to its start status) is never quarantined", async () => {
    const session = new TestSession("loops");
    await session.rpc.create();
    const id = await addTask(session, loopKind, { status: "planned", round: 1, rounds: 7 });
    await untilStatus(session, id, "done");
    const invocations = calls(id);
    expect(invocations.length).toBeGreaterThanOrEqual(5);
    expect(invocations.length).toBeGreaterThan(DEFAULT_KILL_BOUND);
    expect(invocations.every((c) => c.method === "execute")).toBe(true);
    expect(invocations.filter((c) => c.status === "retry_wait")).toHaveLength(2);
    // "done" is durable before the settling invocation returns; its counter resets when it does.
    await until(async () => !(await session.rpc.inspect()).busy, "the last invocation returned");
    const inspection = await session.rpc.inspect();
    expect(inspection.kills).toEqual([]);
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.fault).toBeUndefined();
    expect(seams.reports.filter((report) => report.type === "quarantined")).toEqual([]);
  });

  it("a kill across a change of deployed version does not count", async () => {
    const session = new TestSession("version-change");
    await session.rpc.create();
    const id = await addTask(session, stuckKind, { status: "pending", recovers: false });
    await waitForCalls(id, 1);
    await killAndWake(session);
    await waitForCalls(id, 2);
    expect((await session.rpc.inspect()).kills).toEqual([{ taskId: id, kills: 2, version: "v1" }]);

    seams.version = "v2"; // a deploy: the next instance runs another version
    await killAndWake(session);
    await waitForCalls(id, 3);
    expect((await session.rpc.inspect()).kills).toEqual([{ taskId: id, kills: 1, version: "v2" }]);
    // Three consecutive kills in all, yet the fourth attempt starts.
    await killAndWake(session);
    await waitForCalls(id, 4);
    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.kills).toEqual([{ taskId: id, kills: 2, version: "v2" }]);

    await session.rpc.abortTask(id); // cancels the running recover; its abort handler settles it
    await untilStatus(session, id, "aborted");
    expect((await session.rpc.inspect()).kills).toEqual([]);
  });
});

describe("SessionObject fault", () => {
  it("a faulted session is recorded durably and not auto-driven until an operator clears the fault", async () => {
    registerTestKinds([erase(contractKind(true))]);
    const session = new TestSession("fault");
    await session.rpc.create();
    const id = await addTask(session, contractKind(true), { status: "pending", note: "" });
    await until(async () => (await session.rpc.inspect()).fault !== undefined, "the session faults");
    const fault = (await session.rpc.inspect()).fault;
    expect(fault).toMatchObject({ taskId: id, kind: "test.contract", method: "execute" });
    expect(fault?.message).toContain("without a committed status transition");
    expect(calls(id)).toHaveLength(1);

    // A fresh instance woken by an alarm opens the session but does not drive it.
    await abortAllDurableObjects();
    await runInDurableObject(session.stub, (_instance, state) => state.storage.setAlarm(seams.time.now + 60_000));
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    const inspection = await session.rpc.inspect();
    expect(inspection.fault).toMatchObject({ taskId: id, method: "execute" });
    expect(inspection.start.map((task) => task.id)).toEqual([id]);
    expect(inspection.busy).toBe(false);
    expect(calls(id)).toHaveLength(1);
    expect(await alarmOf(session)).toBeNull();

    // The operator deploys a kind that understands the task and clears the fault: it runs again.
    registerTestKinds([erase(contractKind(false))]);
    await abortAllDurableObjects();
    expect(await session.rpc.clearFault()).toEqual({ cleared: true });
    await untilStatus(session, id, "done");
    expect(calls(id)).toHaveLength(2);
    expect((await session.rpc.inspect()).fault).toBeUndefined();
    expect(await session.rpc.clearFault()).toEqual({ cleared: false });
  });
});

describe("SessionObject shutdown", () => {
  it("shutdown runs the abort handlers of every live task, and the next operation reopens the session", async () => {
    const session = new TestSession("shutdown");
    await session.rpc.create();
    const sleeper = await addTask(session, retryKind, { status: "pending", delayMs: 60_000 });
    const stuck = await addTask(session, stuckKind, { status: "pending", recovers: false });
    await untilStatus(session, sleeper, "retry_wait");
    await untilStatus(session, stuck, "running");

    await session.rpc.shutdown();
    expect(calls(sleeper).map((c) => c.method)).toEqual(["execute", "abort"]);
    expect(calls(stuck).map((c) => c.method)).toEqual(["execute", "abort"]);
    const inspection = await session.rpc.inspect(); // reopens: the shut-down harness is closed
    expect(inspection.start).toEqual([]);
    expect(inspection.inflight).toEqual([]);
    expect(inspection.kills).toEqual([]);
    expect(await statusOf(session, sleeper)).toBe("aborted");
    expect(await statusOf(session, stuck)).toBe("aborted");
    expect(await alarmOf(session)).toBeNull();
  });
});
