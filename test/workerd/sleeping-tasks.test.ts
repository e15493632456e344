/**
 * A sleeping task is not dying (docs/operations.md "Restarts and quarantine"): the host's kill counter counts
 * invocations that die while working, not while parked in a declared wait (a sleep until a durable wake
 * time, or a wait for an external answer). Idle evictions between a schedule's, a recurring job's or
 * the witness's wakes are the normal life of a Durable Object, and every deploy restarts every object;
 * none of them may bring a task nearer quarantine. A task that really kills the object while working,
 * after a wake as well as from its start, is still quarantined.
 *
 * Also here: one witness per rig by construction (a kill between deregister's commit and its abort
 * leaves no second patrol), and the external wait: parked, not busy, no kill counted, answered once,
 * its deadline on the alarm.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { endWait } from "../../src/core/answers.js";
import { bindInbox, bindResult } from "../../src/core/inbox.js";
import { PicoError } from "../../src/core/errors.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { bind } from "../../src/core/state.js";
import { defineTaskKind, erase } from "../../src/core/task-kind.js";
import { newSchedule, occurrenceKey, scheduleDefinition, type ScheduleState } from "../../src/kinds/schedule.js";
import type { Actor } from "../../src/rig/index.js";
import { WITNESS_KIND } from "../../src/rig/index.js";
import { witnessPatrol, witnessTask } from "../../src/rig/state.js";
import type { Id, JsonValue } from "../../src/storage/records.js";
import { DEFAULT_KILL_BOUND } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import {
  addTask,
  call,
  calls,
  clearLog,
  clockOf,
  harnessOf,
  installKinds,
  installSeams,
  logCall,
  ok,
  resetSeams,
  taskOf,
  TestSession,
  until,
  waitForCalls,
  type Seams,
} from "./session-fixtures.js";

const MIN = 60_000;
const mayor: Actor = { role: "mayor" };
let seams: Seams;

beforeEach(() => {
  seams = installSeams();
  clearLog();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

function alarmOf(session: TestSession): Promise<number | null> {
  return runInDurableObject(session.stub, (_instance, state) => state.storage.getAlarm());
}

/** The host's kill rows, read raw (without opening the session). */
function killRows(session: TestSession): Promise<{ task: number; kills: number }[]> {
  return runInDurableObject(session.stub, (_instance, state) =>
    state.storage.sql
      .exec("SELECT task, kills FROM host_kills ORDER BY task")
      .toArray()
      .map((row) => ({ task: Number(row["task"]), kills: Number(row["kills"]) })),
  );
}

/** Wait until nothing works (only parked invocations) and the alarm is the next wake; returns it. */
async function untilParked(session: TestSession): Promise<number> {
  let wake: number | undefined;
  await until(async () => {
    const inspection = await session.rpc.inspect();
    wake = inspection.nextWake;
    return !inspection.busy && wake !== undefined && (await alarmOf(session)) === wake;
  }, "parked with the alarm at the next wake");
  return wake as number;
}

/** An idle eviction, then time moves to the alarm and only the alarm runs. */
async function evictIdleAndWakeAt(session: TestSession, wake: number): Promise<void> {
  await abortAllDurableObjects();
  seams.time.now = Math.max(seams.time.now, wake);
  expect(await runDurableObjectAlarm(session.stub)).toBe(true);
}

describe("sleeping is not dying", () => {
  it("A sleeping schedule survives idle evictions", async () => {
    const session = new TestSession("sleeping-schedule");
    expect((await session.rpc.createSession({ model: "echo" })).ok).toBe(true);
    const scheduleId = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const state = newSchedule(
        { conversationId: h.rootId, input: "hourly report", mode: "followUp", every: MIN, cron: null, timezone: null },
        h.now(),
        null,
      );
      return h.commit((tx) => tx.task(scheduleDefinition, { conversationId: h.rootId, background: true, state }), call);
    });
    const schedule = async (): Promise<ScheduleState> => (await taskOf(session, scheduleId))?.state as ScheduleState;
    const EVICTIONS = DEFAULT_KILL_BOUND * 3;
    for (let round = 1; round <= EVICTIONS; round += 1) {
      const wake = await untilParked(session);
      expect(wake).toBe((await schedule()).nextRunAt);
      // Parked between occurrences: no kill is counted, whatever happened before.
      expect(await killRows(session)).toEqual([]);
      await evictIdleAndWakeAt(session, wake);
      await until(async () => (await schedule()).runs === round, `occurrence ${round} fired`);
    }
    await untilParked(session);
    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.kills).toEqual([]);
    expect(await schedule()).toMatchObject({ status: "waiting", runs: EVICTIONS, skipped: 0 });
  });

  it("An alarm-woken every-schedule runs each due occurrence", async () => {
    // A nextRun schedule every 5 min into an idle conversation nobody types in: each occurrence's input
    // waits for the next accept. The object is evicted between occurrences and only its alarm wakes it.
    const session = new TestSession("alarm-woken-next-run");
    expect((await session.rpc.createSession({ model: "echo" })).ok).toBe(true);
    const scheduleId = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const state = newSchedule(
        { conversationId: h.rootId, input: "status", mode: "nextRun", every: 5 * MIN, cron: null, timezone: null },
        h.now(),
        null,
      );
      return h.commit((tx) => tx.task(scheduleDefinition, { conversationId: h.rootId, background: true, state }), call);
    });
    const schedule = async (): Promise<ScheduleState> => (await taskOf(session, scheduleId))?.state as ScheduleState;
    const queued = () =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        return (await h.storage.readList(bindInbox(h.rootId), { after: 0, limit: 100 })).items.map((item) => ({
          mode: item.value.mode,
          requestId: "requestId" in item.value ? item.value.requestId : undefined,
        }));
      });
    const resultOf = (inputId: number) =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        return (await h.storage.getValue(bindResult(h.rootId, inputId)))?.value;
      });
    const occurrences: number[] = [];
    for (let round = 1; round <= 3; round += 1) {
      const previous = (await schedule()).lastInputId;
      const wake = await untilParked(session);
      expect(wake).toBe((await schedule()).nextRunAt);
      occurrences.push(wake);
      await evictIdleAndWakeAt(session, wake);
      await until(async () => (await schedule()).runs === round, `occurrence ${round} ran`);
      // The due occurrence ran: its own input waits for the next run, and it is the schedule's only one.
      expect(await schedule()).toMatchObject({ status: "waiting", runs: round, skipped: 0, lastRunAt: wake });
      expect(await queued()).toEqual([{ mode: "nextRun", requestId: occurrenceKey(scheduleId, wake) }]);
      // The earlier occurrence's input, still waiting, gave its place to this one's.
      if (previous !== null)
        expect(await resultOf(previous)).toMatchObject({ status: "unanswered", reason: "aborted" });
    }
    expect(new Set(occurrences).size).toBe(3);
  });

  it("A sleeping witness survives idle evictions", async () => {
    const session = new TestSession("sleeping-witness");
    await session.rpc.create();
    await ok(session.rpc.op("rigRegister", mayor, "polecat-alpha", { role: "polecat" }));
    const patrols = () =>
      runInDurableObject(
        session.stub,
        async (instance: SessionObject) =>
          (await harnessOf(instance).storage.getValue(bind(witnessPatrol, {})))?.value?.patrols ?? 0,
      );
    const EVICTIONS = DEFAULT_KILL_BOUND * 3;
    for (let round = 1; round <= EVICTIONS; round += 1) {
      const wake = await untilParked(session);
      expect(await killRows(session)).toEqual([]);
      await evictIdleAndWakeAt(session, wake);
      await until(async () => (await patrols()) === round, `patrol ${round}`);
    }
    await untilParked(session);
    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined).toEqual([]);
    expect(inspection.kills).toEqual([]);
    expect(await patrols()).toBe(EVICTIONS);
  });

  it("A crashing task is still quarantined", async () => {
    installKinds([erase(napperKind)]);
    const session = new TestSession("crashing-after-wake");
    await session.rpc.create();
    const id = await addTask(session, napperKind, { status: "pending" });
    // Each round: the invocation parks in its backoff (alive: not busy, its own count withdrawn), wakes,
    // and is killed while it works. Parking first must not hide the kills that follow each wake.
    for (let kill = 1; kill <= DEFAULT_KILL_BOUND; kill += 1) {
      await waitForCalls(id, kill);
      const wake = await untilParked(session);
      await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
      await until(async () => (await session.rpc.inspect()).busy, `round ${kill}: working after the wake`);
      await abortAllDurableObjects();
      expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    }
    const inspection = await session.rpc.inspect();
    expect(inspection.quarantined.map((task) => task.id)).toEqual([id]);
    expect(inspection.kills).toEqual([{ taskId: id, kills: DEFAULT_KILL_BOUND, version: "v1" }]);
    expect(calls(id).map((c) => c.method)).toEqual(["execute", "recover", "recover"]);
    expect(seams.reports).toContainEqual({
      type: "quarantined",
      taskId: id,
      kind: "test.napper",
      kills: DEFAULT_KILL_BOUND,
    });
  });
});

describe("one witness per rig", () => {
  it("One witness after a kill between deregister and abort", async () => {
    const session = new TestSession("one-witness");
    await session.rpc.create();
    await ok(session.rpc.op("rigRegister", mayor, "polecat-alpha", { role: "polecat" }));
    const first = await runInDurableObject(
      session.stub,
      async (instance: SessionObject) => (await harnessOf(instance).storage.getValue(bind(witnessTask, {})))?.value,
    );
    expect(first).toBeDefined();

    // Deregister the last agent, and kill the object once that commit is durable, before the abort of
    // the witness task that follows it (no later commit of this instance reaches storage).
    await runInDurableObject(session.stub, (instance: SessionObject, state) => {
      const h = harnessOf(instance);
      let killed = false;
      const commit = h.storage.commit.bind(h.storage);
      h.storage.commit = (batch) => (killed ? new Promise<never>(() => undefined) : commit(batch));
      h.onCommit(() => {
        if (killed) return;
        killed = true;
        // abort() also throws in the caller: that rejection is the kill itself.
        void state.storage
          .sync()
          .then(() => state.abort("killed between deregister and abort"))
          .catch(() => undefined);
      });
    });
    await expect(
      runInDurableObject(session.stub, (instance: SessionObject) =>
        instance.op("rigDeregister", mayor, "polecat-alpha"),
      ),
    ).rejects.toThrow();
    const alarm = await alarmOf(session);
    expect(alarm).not.toBeNull();
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    const witnesses = () =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const tasks = (await harnessOf(instance).storage.scanTasks({ kind: WITNESS_KIND, limit: 10 })).items;
        return tasks.filter((t) => t.role !== "terminal").map((t) => t.id);
      });
    // The orphan is still live (its abort never ran); registering again starts a new witness.
    expect(await witnesses()).toEqual([first]);
    await ok(session.rpc.op("rigRegister", mayor, "polecat-bravo", { role: "polecat" }));
    const second = await runInDurableObject(
      session.stub,
      async (instance: SessionObject) => (await harnessOf(instance).storage.getValue(bind(witnessTask, {})))?.value,
    );
    expect(second).not.toBe(first);

    const patrols = () =>
      runInDurableObject(
        session.stub,
        async (instance: SessionObject) =>
          (await harnessOf(instance).storage.getValue(bind(witnessPatrol, {})))?.value?.patrols ?? 0,
      );
    const start = seams.time.now;
    // Three patrol intervals: exactly one patrol per interval, by the registered witness only.
    for (let interval = 1; interval <= 3; interval += 1) {
      const end = start + interval * 5 * MIN;
      for (;;) {
        const wake = await untilParked(session);
        if (wake > end) break;
        await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
      }
      expect(await patrols()).toBe(interval);
    }
    expect(await witnesses()).toEqual([second]);
    const orphan = await taskOf(session, first as Id);
    expect(orphan?.state.status).toBe("ended");
  });
});

describe("a wait for an external answer", () => {
  it("parks without a heartbeat or a counted kill, survives evictions, and the answer recorded once wakes it", async () => {
    installKinds([erase(approvalKind)]);
    const session = new TestSession("answer-wait");
    await session.rpc.create();
    const id = await addTask(session, approvalKind, { status: "pending", deadlineMs: null });
    await until(async () => (await taskOf(session, id))?.state.status === "asking", "asking");
    await until(async () => !(await session.rpc.inspect()).busy, "not busy while waiting");
    // No deadline: no wake time, no alarm kept for it.
    expect((await session.rpc.inspect()).nextWake).toBeUndefined();
    expect(await alarmOf(session)).toBeNull();
    expect(await killRows(session)).toEqual([]);
    // Evicted while waiting, more often than the kill bound; each reopen parks it again.
    for (let round = 0; round < DEFAULT_KILL_BOUND + 1; round += 1) {
      await abortAllDurableObjects();
      await until(
        async () => !(await session.rpc.inspect()).busy && calls(id).length === round + 2,
        `reopen ${round}: waiting again`,
      );
      expect(await killRows(session)).toEqual([]);
    }
    // A wrong key or an unknown task writes nothing.
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      await expect(h.answer(id, "other", true, call)).rejects.toMatchObject({ code: "not_found" });
      await expect(h.answer(9999, "approve", true, call)).rejects.toMatchObject({ code: "not_found" });
      await h.answer(id, "approve", { approved: true, by: "ops" }, call);
    });
    await until(async () => (await taskOf(session, id))?.state.status === "done", "answered");
    expect((await taskOf(session, id))?.state).toEqual({
      status: "done",
      deadlineMs: null,
      outcome: { type: "answered", value: { approved: true, by: "ops" } },
    });
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      // Answered once: the task settled and ended its wait in that commit.
      const second = await h.answer(id, "approve", false, call).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(second).toBeInstanceOf(PicoError);
      expect((second as PicoError).code).toBe("not_found");
    });
    expect((await session.rpc.inspect()).quarantined).toEqual([]);
  });

  it("a second answer to the same wait is refused while the first is not yet consumed", async () => {
    installKinds([erase(approvalKind)]);
    const session = new TestSession("answer-twice");
    await session.rpc.create();
    const id = await addTask(session, approvalKind, { status: "pending", deadlineMs: null });
    await until(
      async () => (await taskOf(session, id))?.state.status === "asking" && !(await session.rpc.inspect()).busy,
      "asking",
    );
    // Evict, then reopen: the answers race the reopened invocation's own wait.
    await abortAllDurableObjects();
    await session.rpc.inspect();
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const results = await Promise.allSettled([
        h.answer(id, "approve", "first", call),
        h.answer(id, "approve", "second", call),
      ]);
      expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
      const refused = results.find((r) => r.status === "rejected");
      expect((refused as PromiseRejectedResult).reason).toMatchObject({ code: "conflict" });
    });
    await until(async () => (await taskOf(session, id))?.state.status === "done", "answered");
    expect((await taskOf(session, id))?.state).toMatchObject({ outcome: { type: "answered", value: "first" } });
  });

  it("its deadline is on the alarm: an evicted object wakes at the deadline and the wait ends unanswered", async () => {
    installKinds([erase(approvalKind)]);
    const session = new TestSession("answer-deadline");
    await session.rpc.create();
    const t0 = seams.time.now;
    const id = await addTask(session, approvalKind, { status: "pending", deadlineMs: 30 * MIN });
    const wake = await untilParked(session);
    expect(wake).toBe(t0 + 30 * MIN);
    expect(await killRows(session)).toEqual([]);
    await evictIdleAndWakeAt(session, wake);
    await until(async () => (await taskOf(session, id))?.state.status === "done", "deadline");
    expect((await taskOf(session, id))?.state).toEqual({
      status: "done",
      deadlineMs: 30 * MIN,
      outcome: { type: "deadline" },
    });
    expect((await session.rpc.inspect()).kills).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------
// Test kinds

/** Parks in a backoff at the start of every invocation, then works until killed (hangs). */
type NapperState = { status: "pending" } | { status: "running" } | { status: "aborted" };

const napperKind = defineTaskKind<NapperState, TaskRuntime>()({
  kind: "test.napper",
  roles: { pending: "start", running: "inflight", aborted: "terminal" },
  initialStatus: "pending",
  async execute(task, runtime, c) {
    logCall("test.napper", task, "execute");
    await runtime.commit((tx) => tx.patch(task, "running", {}), c);
    await runtime.sleep(runtime.now() + MIN, c);
    await hang(c);
  },
  async recover(task, runtime, c) {
    logCall("test.napper", task, "recover");
    await runtime.sleep(runtime.now() + MIN, c);
    await hang(c);
  },
  async abort(task, runtime, c) {
    logCall("test.napper", task, "abort");
    await runtime.commit((tx) => tx.settle(task, "aborted", {}), c);
  },
});

function hang(c: { readonly abortSignal?: AbortSignal }): Promise<never> {
  return new Promise<never>((_resolve, reject) =>
    c.abortSignal?.addEventListener("abort", () => reject(c.abortSignal?.reason), { once: true }),
  );
}

/** Asks for an approval and settles with the answer or the deadline, ending the wait in that commit. */
type ApprovalState =
  | { status: "pending"; deadlineMs: number | null }
  | { status: "asking"; deadlineMs: number | null; until: number | null }
  | {
      status: "done";
      deadlineMs: number | null;
      outcome: { type: "answered"; value: JsonValue } | { type: "deadline" };
    }
  | { status: "aborted"; deadlineMs: number | null };

const approvalKind = defineTaskKind<ApprovalState, TaskRuntime>()({
  kind: "test.approval",
  roles: { pending: "start", asking: "inflight", done: "terminal", aborted: "terminal" },
  initialStatus: "pending",
  async execute(task, runtime, c) {
    logCall("test.approval", task, "execute");
    if (task.state.status !== "pending") return;
    const until = task.state.deadlineMs === null ? null : runtime.now() + task.state.deadlineMs;
    await runtime.commit((tx) => tx.patch(task, "asking", { deadlineMs: task.state.deadlineMs, until }), c);
    await ask(
      task.id,
      task.state.deadlineMs,
      until,
      runtime,
      c,
      (settle) => runtime.commit((tx) => settle(tx), c),
      task,
    );
  },
  async recover(task, runtime, c) {
    logCall("test.approval", task, "recover");
    if (task.state.status !== "asking") return;
    await ask(
      task.id,
      task.state.deadlineMs,
      task.state.until,
      runtime,
      c,
      (settle) => runtime.commit((tx) => settle(tx), c),
      task,
    );
  },
  async abort(task, runtime, c) {
    logCall("test.approval", task, "abort");
    await runtime.commit((tx) => {
      endWait(tx, task.id);
      tx.settle(task, "aborted", { deadlineMs: task.state.deadlineMs });
    }, c);
  },
});

async function ask(
  id: Id,
  deadlineMs: number | null,
  until: number | null,
  runtime: TaskRuntime,
  c: Parameters<TaskRuntime["sleep"]>[1],
  commit: (settle: (tx: Parameters<Parameters<TaskRuntime["commit"]>[0]>[0]) => void) => Promise<void>,
  task: Parameters<(typeof approvalKind)["execute"]>[0],
): Promise<void> {
  const outcome = await runtime.awaitAnswer("approve", until === null ? undefined : { until }, c);
  await commit((tx) => {
    endWait(tx, id);
    tx.settle(task, "done", {
      deadlineMs,
      outcome: outcome.type === "answered" ? { type: "answered", value: outcome.value } : { type: "deadline" },
    });
  });
}
