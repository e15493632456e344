/**
 * Schedules over HTTP (§8.6): interval and cron schedules create a recurring background task that
 * accepts its input at each occurrence, on the session's one alarm. Time is the manual clock of the
 * session fixtures (it starts a day ahead, so alarms never fire on their own); kills are
 * `abortAllDurableObjects()` and wakes `runDurableObjectAlarm`.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ScheduleView } from "../../src/worker/session/schedule-ops.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";
import { clockOf, harnessOf, installSeams, resetSeams, until, type Seams } from "./session-fixtures.js";
import { MAX_START_AHEAD_MS, newSchedule, scheduleDefinition, type ScheduleState } from "../../src/kinds/schedule.js";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const TENANT = "sched";

interface Rig {
  readonly name: string;
  readonly token: string;
  readonly stub: DurableObjectStub<SessionObject>;
}

async function rig(label: string, tenant = TENANT): Promise<Rig> {
  const name = uniqueSession(label);
  const t = await token(tenant, "client");
  expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: {} })).status).toBe(201);
  const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
  return { name, token: t, stub: ns.get(ns.idFromName(`${tenant}:${name}`)) };
}

async function schedule(r: Rig, id: number): Promise<ScheduleView> {
  const res = await call("GET", `/v1/sessions/${r.name}/schedules/${id}`, { token: r.token });
  expect(res.status).toBe(200);
  return json<ScheduleView>(res);
}

function advanceTo(r: Rig, ms: number): Promise<void> {
  return runInDurableObject(r.stub, (instance: SessionObject) => clockOf(instance).advanceTo(ms));
}

async function userTexts(r: Rig): Promise<string[]> {
  const page = await json<{ items: { kind: string; model?: { content: unknown }[] }[] }>(
    await call("GET", `/v1/sessions/${r.name}/conversations/root/entries?kind=user&limit=100`, { token: r.token }),
  );
  return page.items.map((e) => String(e.model?.[0]?.content));
}

/**
 * A conversation with no model: a fork of the root at the start made with the core API. The fork route copies the
 * root's config as it stood before its first entry, so over HTTP every conversation has a model.
 */
async function modelLessFork(name: string): Promise<number> {
  const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
  return runInDurableObject(ns.get(ns.idFromName(`${TENANT}:${name}`)), async (instance: SessionObject) => {
    const root = await harnessOf(instance).root(BACKGROUND_CONTEXT);
    return (await root.fork({ at: "start" }, BACKGROUND_CONTEXT)).id;
  });
}

describe("schedules over HTTP", () => {
  it("an interval schedule accepts its input at each occurrence; GET shows next and last run; PATCH pauses and resumes; DELETE ends it", async () => {
    const r = await rig("interval");
    const t0 = seams.time.now;
    const created = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "tick", every: 60_000 },
    });
    expect(created.status).toBe(201);
    const view = await json<ScheduleView>(created);
    expect(view).toMatchObject({
      conversationId: 1,
      input: "tick",
      mode: "followUp",
      every: 60_000,
      cron: null,
      status: "active",
      nextRunAt: t0 + 60_000,
      runs: 0,
      lastRunAt: null,
    });
    const list = await json<{ items: ScheduleView[] }>(
      await call("GET", `/v1/sessions/${r.name}/schedules`, { token: r.token }),
    );
    expect(list.items.map((s) => s.id)).toEqual([view.id]);

    await advanceTo(r, t0 + 60_000);
    await until(async () => (await schedule(r, view.id)).runs === 1, "first occurrence");
    const first = await schedule(r, view.id);
    expect(first).toMatchObject({ lastRunAt: t0 + 60_000, nextRunAt: t0 + 120_000, skipped: 0 });
    const input = await json<{ result: { status: string } }>(
      await call("GET", `/v1/sessions/${r.name}/inputs/${first.lastInputId}`, { token: r.token }),
    );
    expect(["placed", "done"]).toContain(input.result.status);
    expect(await userTexts(r)).toEqual(["tick"]);

    const paused = await call("PATCH", `/v1/sessions/${r.name}/schedules/${view.id}`, {
      token: r.token,
      body: { paused: true },
    });
    expect(await json<ScheduleView>(paused)).toMatchObject({ status: "paused", nextRunAt: null });
    await advanceTo(r, t0 + 120_000);
    // Paused: the occurrence's time passes and nothing runs (the schedule sleeps with no wake time).
    expect(await schedule(r, view.id)).toMatchObject({
      runs: 1,
      lastRunAt: t0 + 60_000,
      status: "paused",
      nextRunAt: null,
      skipped: 0,
    });
    const resumed = await call("PATCH", `/v1/sessions/${r.name}/schedules/${view.id}`, {
      token: r.token,
      body: { paused: false },
    });
    expect(await json<ScheduleView>(resumed)).toMatchObject({ status: "active", nextRunAt: t0 + 180_000, skipped: 0 });
    await advanceTo(r, t0 + 180_000);
    await until(async () => (await schedule(r, view.id)).runs === 2, "occurrence after resume");
    expect(await userTexts(r)).toEqual(["tick", "tick"]);

    const deleted = await call("DELETE", `/v1/sessions/${r.name}/schedules/${view.id}`, { token: r.token });
    expect(await json<ScheduleView>(deleted)).toMatchObject({ status: "ended", nextRunAt: null });
    expect(
      (await json<{ items: ScheduleView[] }>(await call("GET", `/v1/sessions/${r.name}/schedules`, { token: r.token })))
        .items,
    ).toEqual([]);
    expect(
      (
        await json<{ items: ScheduleView[] }>(
          await call("GET", `/v1/sessions/${r.name}/schedules?all=true`, { token: r.token }),
        )
      ).items,
    ).toHaveLength(1);
    await advanceTo(r, t0 + 400_000);
    expect(await userTexts(r)).toEqual(["tick", "tick"]);
  });

  it("a cron schedule in a timezone runs at cron's next time", async () => {
    const r = await rig("cron");
    const res = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "standup", cron: "0 9 * * 1-5", timezone: "Europe/Berlin" },
    });
    expect(res.status).toBe(201);
    const view = await json<ScheduleView>(res);
    const next = new Date(view.nextRunAt as number);
    expect(next.getTime()).toBeGreaterThan(seams.time.now);
    const berlin = new Intl.DateTimeFormat("en-GB", {
      timeZone: "Europe/Berlin",
      hour: "2-digit",
      minute: "2-digit",
      weekday: "short",
      hour12: false,
    }).format(next);
    expect(berlin).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/);
    await advanceTo(r, view.nextRunAt as number);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the cron occurrence");
    expect(await userTexts(r)).toEqual(["standup"]);
  });

  it("A schedule's occurrences are admitted and counted by limits", async () => {
    // A tenant of its own: limits are the tenant's, and other tests here must not meet them.
    const tenant = `sched-limits-${Date.now().toString(36)}`;
    const operator = await token(tenant, "operator");
    const limit = (inputsPerDay: number): Promise<Response> =>
      call("PUT", "/v1/limits", { token: operator, body: { tenant: { inputsPerDay } } });
    expect((await limit(1)).status).toBe(200);
    const r = await rig("limited", tenant);
    const t0 = seams.time.now;
    const created = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "tick", every: 60_000 },
    });
    const view = await json<ScheduleView>(created);
    await advanceTo(r, t0 + 60_000);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the first occurrence");
    // The day's one input is used: the next occurrence is refused, accepts nothing and is counted as skipped.
    await advanceTo(r, t0 + 120_000);
    await until(async () => (await schedule(r, view.id)).skipped === 1, "the refused occurrence");
    expect(await schedule(r, view.id)).toMatchObject({ runs: 1, lastRunAt: t0 + 60_000, nextRunAt: t0 + 180_000 });
    expect(await userTexts(r)).toEqual(["tick"]);
    const day = new Date(seams.time.now).toISOString().slice(0, 10);
    const counted = async (): Promise<number | undefined> =>
      (
        await json<{ items: { sub: string | null; inputs: number }[] }>(
          await call("GET", `/v1/usage?from=${day}&to=${day}`, { token: operator }),
        )
      ).items.find((d) => d.sub === null)?.inputs;
    // The tenant's totals are its shards' forwarded counts (at most a few seconds behind them).
    await until(async () => (await counted()) === 1, "the occurrence to be counted", 5_000);
    // With room again, the next occurrence runs and is counted.
    expect((await limit(5)).status).toBe(200);
    await advanceTo(r, t0 + 180_000);
    await until(async () => (await schedule(r, view.id)).runs === 2, "the occurrence after the limit was raised");
    expect(await userTexts(r)).toEqual(["tick", "tick"]);
    await until(async () => (await counted()) === 2, "the second occurrence to be counted", 5_000);
  });

  it("bad schedules are refused with a clear error and write nothing", async () => {
    const r = await rig("invalid");
    const before = await lastSeq(TENANT, r.name);
    const cases: [unknown, string][] = [
      [{ input: "x", every: 500 }, "every"],
      [{ input: "x" }, "every"],
      [{ input: "x", every: 5000, cron: "* * * * *" }, "every"],
      [{ input: "x", cron: "not a cron" }, "cron"],
      [{ input: "x", cron: "0 9 * * *", timezone: "Mars/Olympus" }, "timezone"],
      [{ input: "x", every: 5000, timezone: "Europe/Berlin" }, "timezone"],
      [{ input: "x", every: 5000, catchUp: "all" }, "catchUp"],
      [{ input: "x", cron: "0 9 * * *", catchUp: null }, "catchUp"],
    ];
    for (const [body, field] of cases) {
      const res = await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await json<{ field?: string }>(res)).field).toBe(field);
    }
    expect(
      (
        await call("POST", `/v1/sessions/${r.name}/schedules`, {
          token: r.token,
          body: { input: "x", every: 5000, conversation: 999 },
        })
      ).status,
    ).toBe(404);
    expect((await call("GET", `/v1/sessions/${r.name}/schedules/999`, { token: r.token })).status).toBe(404);
    expect(await lastSeq(TENANT, r.name)).toBe(before);
  });

  it("A schedule aimed at a conversation with no model is refused and writes nothing; the session keeps working", async () => {
    const r = await rig("no-model");
    // A conversation with no config of its own: no model until one is set.
    const id = await modelLessFork(r.name);
    const before = await lastSeq(TENANT, r.name);
    const res = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "tick", every: 60_000, conversation: id },
    });
    expect(res.status).toBe(400);
    const problem = await json<{ field?: string; detail?: string }>(res);
    expect(problem.field).toBe("conversation");
    expect(problem.detail).toMatch(/no model/);
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    // Once the fork has a model, the same schedule is accepted and fires.
    expect(
      (
        await call("PATCH", `/v1/sessions/${r.name}/conversations/${id}/config`, {
          token: r.token,
          body: { model: "echo" },
        })
      ).status,
    ).toBe(200);
    const created = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "tick", every: 60_000, conversation: id },
    });
    expect(created.status).toBe(201);
    const view = await json<ScheduleView>(created);
    await advanceTo(r, view.nextRunAt as number);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the occurrence on the fork");
    expect((await call("GET", `/v1/sessions/${r.name}`, { token: r.token })).status).toBe(200);
  });

  it("Cron and timezone errors name their own field; startAt at most ten years ahead", async () => {
    const r = await rig("fields");
    const before = await lastSeq(TENANT, r.name);
    const now = seams.time.now;
    const cases: [Record<string, unknown>, string][] = [
      [{ input: "x", cron: "0 9 * * *", timezone: "Mars/Olympus" }, "timezone"],
      [{ input: "x", cron: "0 9 * * *", timezone: "not a zone" }, "timezone"],
      [{ input: "x", cron: "0 9 * *" }, "cron"],
      [{ input: "x", cron: "0 0 9 * * * 2030 1" }, "cron"],
      [{ input: "x", cron: "61 * * * *", timezone: "Europe/Berlin" }, "cron"],
      [{ input: "x", every: 60_000, startAt: now + MAX_START_AHEAD_MS + 1 }, "startAt"],
      [{ input: "x", cron: "0 9 * * *", startAt: now + MAX_START_AHEAD_MS + 1 }, "startAt"],
      [{ input: "x", every: 60_000, startAt: new Date(now + 11 * 366 * 86_400_000).toISOString() }, "startAt"],
      [{ input: "x", every: 60_000, startAt: 9e15 }, "startAt"],
    ];
    for (const [body, field] of cases) {
      const res = await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      expect((await json<{ field?: string }>(res)).field, JSON.stringify(body)).toBe(field);
    }
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    // Exactly ten years ahead is accepted.
    const far = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "x", every: 60_000, startAt: now + MAX_START_AHEAD_MS },
    });
    expect(far.status).toBe(201);
    expect(await json<ScheduleView>(far)).toMatchObject({ nextRunAt: now + MAX_START_AHEAD_MS });
  });

  it("Six-field crons: the leading field is seconds, seven fields add a year", async () => {
    const r = await rig("six-fields");
    const t0 = seams.time.now;
    const res = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "sec", cron: "*/10 * * * * *" },
    });
    expect(res.status).toBe(201);
    const view = await json<ScheduleView>(res);
    expect(view.cron).toBe("*/10 * * * * *");
    expect(view.nextRunAt).toBe(Math.floor(t0 / 10_000) * 10_000 + 10_000);
    await advanceTo(r, view.nextRunAt as number);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the six-field occurrence");
    expect(await schedule(r, view.id)).toMatchObject({
      lastRunAt: view.nextRunAt,
      nextRunAt: (view.nextRunAt as number) + 10_000,
    });
    const year = new Date(t0).getUTCFullYear() + 2;
    const seven = await call("POST", `/v1/sessions/${r.name}/schedules`, {
      token: r.token,
      body: { input: "y", cron: `30 0 12 1 6 * ${year}` },
    });
    expect(seven.status).toBe(201);
    expect(await json<ScheduleView>(seven)).toMatchObject({ nextRunAt: Date.UTC(year, 5, 1, 12, 0, 30) });
  });

  it("after downtime the next occurrence runs once and the missed ones are recorded, not replayed; a second alarm accepts nothing more", async () => {
    const r = await rig("downtime");
    const t0 = seams.time.now;
    const view = await json<ScheduleView>(
      await call("POST", `/v1/sessions/${r.name}/schedules`, {
        token: r.token,
        body: { input: "tick", every: 60_000 },
      }),
    );
    await abortAllDurableObjects();
    seams.time.now = t0 + 60_000 * 4 + 30_000; // asleep through four occurrences
    expect(await runDurableObjectAlarm(r.stub)).toBe(true);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the occurrence after the downtime");
    expect(await schedule(r, view.id)).toMatchObject({
      runs: 1,
      skipped: 3,
      lastRunAt: t0 + 60_000,
      nextRunAt: t0 + 300_000,
    });
    // Alarms are at-least-once: another delivery changes nothing.
    await runDurableObjectAlarm(r.stub);
    await runDurableObjectAlarm(r.stub);
    expect(await schedule(r, view.id)).toMatchObject({ runs: 1, skipped: 3 });
    expect(await userTexts(r)).toEqual(["tick"]);
  });
});

describe("schedules after long downtime", () => {
  const MIN = 60_000;
  const HOUR = 3_600_000;
  const DAY = 86_400_000;

  /** A fresh stub: one that reached an aborted object stays broken. */
  function stubOf(r: Rig): DurableObjectStub<SessionObject> {
    const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
    return ns.get(ns.idFromName(`${TENANT}:${r.name}`));
  }
  async function create(r: Rig, body: Record<string, unknown>): Promise<ScheduleView> {
    const res = await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body });
    expect(res.status, JSON.stringify(body)).toBe(201);
    return json<ScheduleView>(res);
  }
  /** The driver's earliest task wake (the schedule's reason to wake) and the object's alarm. */
  const wakesOf = (r: Rig) =>
    runInDurableObject(stubOf(r), async (instance: SessionObject, state) => ({
      task: harnessOf(instance).driver.nextWake,
      alarm: await state.storage.getAlarm(),
    }));
  /**
   * Wake the evicted object by its alarm only; wait until the schedule has moved past `before`'s
   * nextRunAt and sleeps to its new one, and the alarm wakes it by then (the alarm may be earlier: the
   * directory's activity update is a reason to wake too).
   */
  async function wake(r: Rig, before: ScheduleView): Promise<ScheduleView> {
    expect(await runDurableObjectAlarm(stubOf(r))).toBe(true);
    await until(
      async () => (await schedule(r, before.id)).nextRunAt !== before.nextRunAt,
      `schedule ${before.id} moved on`,
    );
    const after = await schedule(r, before.id);
    await until(
      async () => (await wakesOf(r)).task === after.nextRunAt,
      `schedule ${before.id} asleep until its next run`,
    );
    const { alarm } = await wakesOf(r);
    expect(alarm).not.toBeNull();
    expect(alarm).toBeLessThanOrEqual(after.nextRunAt as number);
    return after;
  }
  /** An alarm delivered again (on the live instance, then on a fresh one) accepts nothing more. */
  async function redeliver(r: Rig, view: ScheduleView): Promise<void> {
    await runDurableObjectAlarm(stubOf(r));
    expect(await schedule(r, view.id)).toEqual(view);
    await abortAllDurableObjects();
    await runDurableObjectAlarm(stubOf(r));
    expect(await schedule(r, view.id)).toEqual(view);
  }

  it("No backlog after long downtime", { timeout: 120_000 }, async () => {
    const t0 = seams.time.now;
    const one = await rig("gap-one");
    const none = await rig("gap-none");
    const minutely = await rig("gap-cron");
    const hourlyOne = await create(one, { input: "hourly", every: HOUR });
    expect(hourlyOne).toMatchObject({ catchUp: "one", skippedCapped: false, nextRunAt: t0 + HOUR });
    const hourlyNone = await create(none, { input: "hourly", every: HOUR, catchUp: "none" });
    expect(hourlyNone).toMatchObject({ catchUp: "none", skippedCapped: false, nextRunAt: t0 + HOUR });
    const cron = await create(minutely, { input: "minutely", cron: "* * * * *" });
    expect(cron).toMatchObject({ catchUp: "one", skippedCapped: false });

    // Evicted; 30 days and 30 minutes pass: 720 hourly occurrences are due (t0 + 1 h ... t0 + 720 h).
    await abortAllDurableObjects();
    const late = t0 + 30 * DAY + 30 * MIN;
    seams.time.now = late;

    // catchUp "one": one run for the whole gap (the first missed occurrence's), the other 719 counted exactly.
    const afterOne = await wake(one, hourlyOne);
    expect(afterOne).toMatchObject({
      status: "active",
      runs: 1,
      lastRunAt: t0 + HOUR,
      skipped: 719,
      skippedCapped: false,
      nextRunAt: t0 + 721 * HOUR,
    });
    expect(afterOne.nextRunAt).toBeGreaterThan(late);
    expect(await userTexts(one)).toEqual(["hourly"]);
    // Once the directory's activity update is out (it is due a minute after the occurrence's commits), the alarm is the
    // schedule's next run.
    await runInDurableObject(stubOf(one), (instance: SessionObject) => clockOf(instance).advanceTo(late + 2 * MIN));
    await runDurableObjectAlarm(stubOf(one));
    await until(async () => (await wakesOf(one)).alarm === afterOne.nextRunAt, "the alarm at the next run");
    await redeliver(one, afterOne);
    expect(await userTexts(one)).toEqual(["hourly"]);

    // catchUp "none": the gap fires nothing, all 720 are counted; the next occurrence on time runs.
    const afterNone = await wake(none, hourlyNone);
    expect(afterNone).toMatchObject({
      status: "active",
      runs: 0,
      lastRunAt: null,
      lastInputId: null,
      skipped: 720,
      skippedCapped: false,
      nextRunAt: t0 + 721 * HOUR,
    });
    expect(await userTexts(none)).toEqual([]);
    await redeliver(none, afterNone);
    expect(await userTexts(none)).toEqual([]);
    // (The object is up: its sleeping invocation wakes on its clock at the due time.)
    await runInDurableObject(stubOf(none), (instance: SessionObject) => clockOf(instance).advanceTo(t0 + 721 * HOUR));
    await until(async () => (await schedule(none, hourlyNone.id)).runs === 1, "the on-time occurrence after the gap");
    expect(await schedule(none, hourlyNone.id)).toMatchObject({
      runs: 1,
      lastRunAt: t0 + 721 * HOUR,
      skipped: 720,
      nextRunAt: t0 + 722 * HOUR,
    });
    expect(await userTexts(none)).toEqual(["hourly"]);

    // A minutely cron asleep for 100 days (144,000 occurrences): one run, the count stops at 10,000 and
    // says it is a lower bound; the next occurrence is the first minute after now, and the alarm is set to it.
    await abortAllDurableObjects();
    const later = t0 + 100 * DAY + 30_000;
    seams.time.now = later;
    const afterCron = await wake(minutely, cron);
    const nextMinute = Math.floor(later / MIN) * MIN + MIN;
    expect(afterCron).toMatchObject({
      status: "active",
      runs: 1,
      lastRunAt: cron.nextRunAt,
      skipped: 10_000,
      skippedCapped: true,
      nextRunAt: nextMinute,
    });
    expect(await userTexts(minutely)).toEqual(["minutely"]);
    await redeliver(minutely, afterCron);
    expect(await userTexts(minutely)).toEqual(["minutely"]);
  });

  it("A stored schedule whose conversation has no model skips its occurrence; the session does not fault", async () => {
    const r = await rig("no-model-stored");
    const t0 = seams.time.now;
    const forkId = await modelLessFork(r.name);
    // Stored before creation checked the model (the route refuses it now): aimed at the model-less fork.
    const id = await runInDurableObject(stubOf(r), async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const state = newSchedule(
        {
          conversationId: forkId,
          input: "tick",
          mode: "followUp",
          every: HOUR,
          cron: null,
          timezone: null,
          catchUp: "one",
        },
        t0,
        null,
      );
      return h.commit(
        (tx) => tx.task(scheduleDefinition, { conversationId: forkId, background: true, state }),
        BACKGROUND_CONTEXT,
      );
    });
    await advanceTo(r, t0 + HOUR);
    await until(async () => (await schedule(r, id)).nextRunAt === t0 + 2 * HOUR, "the occurrence without a model");
    expect(await schedule(r, id)).toMatchObject({ status: "active", runs: 0, skipped: 1, lastInputId: null });
    // The session still works: root answers, and once the fork has a model the next occurrence runs.
    expect(
      (
        await call("POST", `/v1/sessions/${r.name}/conversations/root/inputs?wait=5`, {
          token: r.token,
          body: { input: "still here" },
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await call("PATCH", `/v1/sessions/${r.name}/conversations/${forkId}/config`, {
          token: r.token,
          body: { model: "echo" },
        })
      ).status,
    ).toBe(200);
    await advanceTo(r, t0 + 2 * HOUR);
    await until(async () => (await schedule(r, id)).runs === 1, "the occurrence once a model is set");
    expect(await schedule(r, id)).toMatchObject({ status: "active", runs: 1, skipped: 1, nextRunAt: t0 + 3 * HOUR });
  });

  it("a schedule stored before catchUp existed shows catchUp one and catches up with one run", async () => {
    const r = await rig("gap-stored");
    const t0 = seams.time.now;
    const id = await runInDurableObject(stubOf(r), async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const { catchUp: _catchUp, ...stored } = newSchedule(
        { conversationId: h.rootId, input: "stored", mode: "followUp", every: HOUR, cron: null, timezone: null },
        t0,
        null,
      );
      return h.commit(
        (tx) => tx.task(scheduleDefinition, { conversationId: h.rootId, background: true, state: stored }),
        BACKGROUND_CONTEXT,
      );
    });
    const before = await schedule(r, id);
    expect(before).toMatchObject({ catchUp: "one", skippedCapped: false, nextRunAt: t0 + HOUR });
    await abortAllDurableObjects();
    seams.time.now = t0 + 3 * DAY + 10 * MIN; // 72 hourly occurrences due
    const after = await wake(r, before);
    expect(after).toMatchObject({
      catchUp: "one",
      runs: 1,
      lastRunAt: t0 + HOUR,
      skipped: 71,
      skippedCapped: false,
      nextRunAt: t0 + 73 * HOUR,
    });
    expect(await userTexts(r)).toEqual(["stored"]);
  });

  it("a cron expression whose last occurrence has passed runs it once and ends the schedule; the session does not fault", async () => {
    const r = await rig("gap-last");
    const year = new Date(seams.time.now).getUTCFullYear() + 1;
    const view = await create(r, { input: "new year", cron: `0 0 0 1 1 * ${year}` });
    expect(view).toMatchObject({ status: "active", nextRunAt: Date.UTC(year, 0, 1) });
    await abortAllDurableObjects();
    seams.time.now = Date.UTC(year, 0, 1) + DAY;
    expect(await runDurableObjectAlarm(stubOf(r))).toBe(true);
    await until(
      async () => (await schedule(r, view.id)).status === "ended",
      "the schedule ended after its last occurrence",
    );
    expect(await schedule(r, view.id)).toMatchObject({
      status: "ended",
      nextRunAt: null,
      runs: 1,
      lastRunAt: Date.UTC(year, 0, 1),
      skipped: 0,
    });
    expect(await userTexts(r)).toEqual(["new year"]);
    const inspect = await call("GET", `/v1/sessions/${r.name}/inspect`, { token: await token(TENANT, "operator") });
    expect(inspect.status).toBe(200);
    expect(await json<{ fault?: unknown }>(inspect)).not.toHaveProperty("fault");
  });
});

describe("pausing and editing a schedule", () => {
  const MIN = 60_000;
  function stubOf(r: Rig): DurableObjectStub<SessionObject> {
    const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
    return ns.get(ns.idFromName(`${TENANT}:${r.name}`));
  }
  const driverOf = (r: Rig) =>
    runInDurableObject(stubOf(r), async (instance: SessionObject, state) => {
      const driver = harnessOf(instance).driver;
      return {
        nextWake: driver.nextWake,
        busy: driver.busy,
        live: driver.liveCount(),
        alarm: await state.storage.getAlarm(),
      };
    });
  async function patch(r: Rig, id: number, body: Record<string, unknown>): Promise<ScheduleView> {
    const res = await call("PATCH", `/v1/sessions/${r.name}/schedules/${id}`, { token: r.token, body });
    expect(res.status, JSON.stringify(body)).toBe(200);
    return json<ScheduleView>(res);
  }
  const stored = (r: Rig, id: number) =>
    runInDurableObject(
      stubOf(r),
      async (instance: SessionObject) =>
        (await harnessOf(instance).storage.getTasks([id])).get(id)?.state as ScheduleState,
    );

  it("A paused schedule does not wake the object: it sleeps with no wake time, no alarm is armed for it, and a resume plans its next occurrence from now", async () => {
    const r = await rig("paused-sleeps");
    const t0 = seams.time.now;
    const view = await json<ScheduleView>(
      await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body: { input: "tick", every: MIN } }),
    );
    await until(async () => (await driverOf(r)).nextWake === t0 + MIN, "asleep until the first occurrence");
    expect(await patch(r, view.id, { paused: true })).toMatchObject({ status: "paused", nextRunAt: null });
    // The schedule applied the pause in its own commit and sleeps with no wake time.
    expect(await stored(r, view.id)).toMatchObject({ status: "paused" });
    await until(async () => {
      const d = await driverOf(r);
      return d.live === 1 && !d.busy && d.nextWake === undefined;
    }, "the paused schedule parked with no wake time");
    // Let the directory's activity update go out (its alarm is due a minute after the commits): then no alarm is left.
    await advanceTo(r, t0 + 2 * MIN + 30_000);
    const directory = await driverOf(r);
    if (directory.alarm !== null) await runDurableObjectAlarm(stubOf(r));
    await until(async () => (await driverOf(r)).alarm === null, "no alarm while only a paused schedule lives");
    expect(await schedule(r, view.id)).toMatchObject({ status: "paused", runs: 0, skipped: 0, nextRunAt: null });

    // Evicted; ten occurrences pass: nothing wakes the object.
    await abortAllDurableObjects();
    seams.time.now = t0 + 10 * MIN + 30_000;
    expect(await runDurableObjectAlarm(stubOf(r))).toBe(false);
    expect(await userTexts({ ...r, stub: stubOf(r) })).toEqual([]);
    // A request opens it: the paused schedule starts parked, with no wake time, and is not counted busy.
    await until(async () => {
      const d = await driverOf(r);
      return !d.busy && d.nextWake === undefined && d.alarm === null;
    }, "reopened: still parked with no wake time");

    // Resume: the next occurrence is the first of its grid after now; the paused ones are neither run nor counted.
    const resumed = await patch(r, view.id, { paused: false });
    expect(resumed).toMatchObject({ status: "active", nextRunAt: t0 + 11 * MIN, runs: 0, skipped: 0 });
    await until(async () => (await driverOf(r)).nextWake === t0 + 11 * MIN, "asleep until the next occurrence");
    await advanceTo({ ...r, stub: stubOf(r) }, t0 + 11 * MIN);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the occurrence after the resume");
    expect(await userTexts(r)).toEqual(["tick"]);
  });

  it("Pause and resume reach a schedule that has not yet slept: a resume right after a reopen is not lost", async () => {
    const r = await rig("paused-reopen");
    const t0 = seams.time.now;
    const view = await json<ScheduleView>(
      await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body: { input: "tick", every: MIN } }),
    );
    await patch(r, view.id, { paused: true });
    await abortAllDurableObjects();
    seams.time.now = t0 + 5 * MIN + 1000;
    // The PATCH itself opens the object: its commit and interrupt race the schedule's first read.
    expect(await patch(r, view.id, { paused: false })).toMatchObject({ status: "active", nextRunAt: t0 + 6 * MIN });
    expect(await stored(r, view.id)).toMatchObject({ status: "waiting", nextRunAt: t0 + 6 * MIN });
    await until(async () => (await driverOf(r)).nextWake === t0 + 6 * MIN, "asleep until the next occurrence");
  });

  it("PATCH edits a schedule's every, cron, timezone and input; the schedule applies the edit in its own commit and keeps its id", async () => {
    const r = await rig("edit");
    const t0 = seams.time.now;
    const view = await json<ScheduleView>(
      await call("POST", `/v1/sessions/${r.name}/schedules`, { token: r.token, body: { input: "a", every: MIN } }),
    );
    await until(async () => (await driverOf(r)).nextWake === t0 + MIN, "asleep until the first occurrence");

    // A new interval and input: the first occurrence of the new grid is one interval from now.
    const edited = await patch(r, view.id, { every: 2 * MIN, input: "b" });
    expect(edited).toMatchObject({
      id: view.id,
      status: "active",
      every: 2 * MIN,
      cron: null,
      timezone: null,
      input: "b",
      nextRunAt: t0 + 2 * MIN,
      runs: 0,
    });
    expect(await stored(r, view.id)).toMatchObject({
      status: "waiting",
      every: 2 * MIN,
      input: "b",
      nextRunAt: t0 + 2 * MIN,
    });
    await until(async () => (await driverOf(r)).nextWake === t0 + 2 * MIN, "asleep until the edited occurrence");
    await advanceTo(r, t0 + MIN);
    expect(await schedule(r, view.id)).toMatchObject({ runs: 0 });
    await advanceTo(r, t0 + 2 * MIN);
    await until(async () => (await schedule(r, view.id)).runs === 1, "the edited occurrence");
    expect(await userTexts(r)).toEqual(["b"]);

    // To a cron expression in a timezone, then only the timezone.
    const cron = await patch(r, view.id, { cron: "0 9 * * *", timezone: "Europe/Berlin" });
    expect(cron).toMatchObject({
      id: view.id,
      every: null,
      cron: "0 9 * * *",
      timezone: "Europe/Berlin",
      runs: 1,
      lastRunAt: t0 + 2 * MIN,
    });
    const at = (zone: string, ms: number) =>
      new Intl.DateTimeFormat("en-GB", { timeZone: zone, hour: "2-digit", minute: "2-digit", hour12: false }).format(
        new Date(ms),
      );
    expect(at("Europe/Berlin", cron.nextRunAt as number)).toBe("09:00");
    expect(cron.nextRunAt as number).toBeGreaterThan(seams.time.now);
    const zone = await patch(r, view.id, { timezone: "America/New_York" });
    expect(zone).toMatchObject({ cron: "0 9 * * *", timezone: "America/New_York" });
    expect(at("America/New_York", zone.nextRunAt as number)).toBe("09:00");
    await until(async () => (await driverOf(r)).nextWake === zone.nextRunAt, "asleep until the edited cron occurrence");

    // An edit while paused applies and the schedule stays paused; the resume runs on the edited grid.
    await patch(r, view.id, { paused: true });
    expect(await patch(r, view.id, { every: 5 * MIN, mode: "nextRun", catchUp: "none" })).toMatchObject({
      status: "paused",
      every: 5 * MIN,
      cron: null,
      timezone: null,
      mode: "nextRun",
      catchUp: "none",
      nextRunAt: null,
    });
    const now = seams.time.now;
    expect(await patch(r, view.id, { paused: false })).toMatchObject({
      status: "active",
      every: 5 * MIN,
      nextRunAt: now + 5 * MIN,
    });

    // Bad edits are refused naming the field and write nothing.
    const before = await lastSeq(TENANT, r.name);
    const cases: [Record<string, unknown>, string][] = [
      [{}, "paused"],
      [{ timezone: "Europe/Berlin" }, "timezone"],
      [{ cron: "0 9 * * *", timezone: "Mars/Olympus" }, "timezone"],
      [{ cron: "not a cron" }, "cron"],
      [{ every: 500 }, "every"],
      [{ every: MIN, cron: "* * * * *" }, "every"],
      [{ input: "" }, "input"],
      [{ startAt: now }, "startAt"],
    ];
    for (const [body, field] of cases) {
      const res = await call("PATCH", `/v1/sessions/${r.name}/schedules/${view.id}`, { token: r.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await json<{ field?: string }>(res)).field, JSON.stringify(body)).toBe(field);
    }
    expect(await lastSeq(TENANT, r.name)).toBe(before);
    const list = await json<{ items: ScheduleView[] }>(
      await call("GET", `/v1/sessions/${r.name}/schedules?all=true`, { token: r.token }),
    );
    expect(list.items.map((s) => s.id)).toEqual([view.id]);
  });
});

describe("one pending occurrence per schedule", () => {
  async function inbox(name: string, t: string): Promise<{ id: number; waiting: boolean }[]> {
    const snapshot = await json<{ inbox: { id: number; waiting: boolean }[] }>(
      await call("GET", `/v1/sessions/${name}/conversations/root`, { token: t }),
    );
    return snapshot.inbox;
  }

  it(
    "A schedule queues at most one pending occurrence: behind a turn that does not end, later occurrences are counted skipped",
    { timeout: 60_000 },
    async () => {
      const name = uniqueSession("pending-busy");
      const t = await token(TENANT, "client");
      // echo-slow paces its answer in real time: the first turn stays live while the clock passes occurrences.
      expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: { model: "echo-slow" } })).status).toBe(201);
      const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
      const r: Rig = { name, token: t, stub: ns.get(ns.idFromName(`${TENANT}:${name}`)) };
      const t0 = seams.time.now;
      const long = await call("POST", `/v1/sessions/${name}/conversations/root/inputs`, {
        token: t,
        body: { input: "a long answer that streams for a while so that the turn stays live. ".repeat(20) },
      });
      expect(long.status).toBeLessThan(300);
      const view = await json<ScheduleView>(
        await call("POST", `/v1/sessions/${name}/schedules`, { token: t, body: { input: "tick", every: 60_000 } }),
      );
      for (let k = 1; k <= 4; k++) {
        await advanceTo(r, t0 + k * 60_000);
        await until(async () => (await schedule(r, view.id)).nextRunAt === t0 + (k + 1) * 60_000, `occurrence ${k}`);
      }
      // The first occurrence is queued behind the turn; the three after it found it still pending.
      const after = await schedule(r, view.id);
      expect(after).toMatchObject({ runs: 1, skipped: 3, lastRunAt: t0 + 60_000 });
      expect((await inbox(name, t)).map((item) => item.id)).toEqual([after.lastInputId]);
      await call("POST", `/v1/sessions/${name}/conversations/root/abort`, { token: t, body: {} });
    },
  );

  it("A nextRun schedule keeps one queued input, not one per occurrence: each occurrence runs and its input replaces the waiting one; once it is placed the next occurrence queues again", async () => {
    const r = await rig("pending-next-run");
    const t0 = seams.time.now;
    const view = await json<ScheduleView>(
      await call("POST", `/v1/sessions/${r.name}/schedules`, {
        token: r.token,
        body: { input: "later", every: 60_000, mode: "nextRun" },
      }),
    );
    for (let k = 1; k <= 3; k++) {
      await advanceTo(r, t0 + k * 60_000);
      await until(async () => (await schedule(r, view.id)).nextRunAt === t0 + (k + 1) * 60_000, `occurrence ${k}`);
    }
    const first = await schedule(r, view.id);
    expect(first).toMatchObject({ runs: 3, skipped: 0, lastRunAt: t0 + 3 * 60_000 });
    expect((await inbox(r.name, r.token)).map((item) => item.id)).toEqual([first.lastInputId]);
    // An explicit accept places the queued nextRun input: the next occurrence queues one again.
    const accepted = await call("POST", `/v1/sessions/${r.name}/conversations/root/inputs`, {
      token: r.token,
      body: { input: "now" },
    });
    expect(accepted.status).toBeLessThan(300);
    await until(async () => (await inbox(r.name, r.token)).length === 0, "the nextRun input placed");
    await advanceTo(r, t0 + 4 * 60_000);
    await until(async () => (await schedule(r, view.id)).runs === 4, "the occurrence after the placement");
    const second = await schedule(r, view.id);
    expect(second).toMatchObject({ runs: 4, skipped: 0, lastRunAt: t0 + 4 * 60_000 });
    expect((await inbox(r.name, r.token)).map((item) => item.id)).toEqual([second.lastInputId]);
  });
});

describe("schedules: delete mid-run", () => {
  it(
    "DELETE while an occurrence's input is being answered ends the schedule; that input is answered once; no further occurrence fires, even when the alarm is delivered again",
    { timeout: 60_000 },
    async () => {
      const name = uniqueSession("delete-mid-run");
      const t = await token(TENANT, "client");
      // echo-slow paces its answer in real time (~200 ms per 16 characters): the occurrence's turn stays live for
      // seconds.
      expect((await call("PUT", `/v1/sessions/${name}`, { token: t, body: { model: "echo-slow" } })).status).toBe(201);
      const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
      const r: { -readonly [K in keyof Rig]: Rig[K] } = {
        name,
        token: t,
        stub: ns.get(ns.idFromName(`${TENANT}:${name}`)),
      };
      const t0 = seams.time.now;
      const text = "a scheduled question whose answer takes a while to stream: ".repeat(5);
      const view = await json<ScheduleView>(
        await call("POST", `/v1/sessions/${name}/schedules`, { token: t, body: { input: text, every: 60_000 } }),
      );

      await advanceTo(r, t0 + 60_000);
      await until(async () => (await schedule(r, view.id)).runs === 1, "the first occurrence accepted");
      const { lastInputId } = await schedule(r, view.id);
      const result = async () =>
        (
          await json<{ result: { status: string; answer?: number } }>(
            await call("GET", `/v1/sessions/${name}/inputs/${lastInputId}`, { token: t }),
          )
        ).result;
      expect((await result()).status).toBe("placed"); // being answered

      const deleted = await call("DELETE", `/v1/sessions/${name}/schedules/${view.id}`, { token: t });
      expect(deleted.status).toBe(200);
      expect(await json<ScheduleView>(deleted)).toMatchObject({ status: "ended", nextRunAt: null, runs: 1 });
      // The schedule ended while its occurrence's turn was still running: that turn is the conversation's,
      // not the schedule's, and runs on.
      expect((await result()).status).toBe("placed");
      for (let i = 0; i < 400 && ["queued", "placed"].includes((await result()).status); i++)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await result()).status).toBe("done");
      const answers = await json<{ items: { id: number; model?: { content: unknown }[] }[] }>(
        await call("GET", `/v1/sessions/${name}/conversations/root/entries?kind=assistant&limit=100`, { token: t }),
      );
      expect(answers.items).toHaveLength(1);
      expect(answers.items[0]?.id).toBe((await result()).answer);

      // Later occurrences: the clock passes them and the alarm is delivered (twice); nothing is accepted.
      await advanceTo(r, t0 + 240_000);
      await runDurableObjectAlarm(r.stub);
      await abortAllDurableObjects();
      seams.time.now = t0 + 400_000;
      r.stub = ns.get(ns.idFromName(`${TENANT}:${name}`)); // a fresh instance, opened by the alarm
      await runDurableObjectAlarm(r.stub);
      expect(await userTexts(r)).toEqual([text]);
      expect(await schedule(r, view.id)).toMatchObject({ status: "ended", runs: 1, nextRunAt: null });
      const live = await runInDurableObject(
        r.stub,
        (_i, state) => state.storage.sql.exec("SELECT count(*) AS n FROM tasks WHERE role != 'terminal'").one()["n"],
      );
      expect(live).toBe(0);
    },
  );
});

describe("schedules share the one alarm", () => {
  // Exact counts: every setAlarm is a billed write, and it is called only when the earliest due time
  // changes. A schedule's first invocation only sleeps until its due time, so dispatching it is not
  // "busy" (no heartbeat), and the guard of live work committed into an idle session is not needed
  // when that work has a due time (the alarm at it wakes a killed object). Both regimes: due times
  // within the 30 s heartbeat interval of now, and beyond it.
  const thousand = (label: string, lead: number) => async () => {
    const r = await rig(label);
    const t0 = seams.time.now;
    const alarm = () => runInDurableObject(r.stub, (_i, state) => state.storage.getAlarm());
    const stats = () => runInDurableObject(r.stub, (instance: SessionObject) => ({ ...instance.alarmStats }));
    const settled = async (label: string, at: number, sets: number): Promise<void> => {
      await until(async () => (await alarm()) === at && (await stats()).sets === sets, label);
    };
    const start = await stats();
    expect(start).toMatchObject({ sets: 0, clears: 0, changes: 0 });

    // 990 schedules in one commit of an idle session; their due times increase with their ids. Exactly
    // one write, the earliest due time: never one per schedule, and no transient guard or heartbeat.
    const bulkFirst = t0 + lead;
    await runInDurableObject(r.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      await h.commit((tx) => {
        for (let i = 0; i < 990; i++) {
          const state = newSchedule(
            { conversationId: h.rootId, input: `s${i}`, mode: "nextRun", every: 3_600_000, cron: null, timezone: null },
            t0,
            bulkFirst + i * 1000,
          );
          tx.task(scheduleDefinition, { conversationId: h.rootId, background: true, state });
        }
      }, BACKGROUND_CONTEXT);
    });
    await settled("the alarm at the earliest of the bulk", bulkFirst, 1);
    const bulk = await stats();
    expect(bulk).toMatchObject({ sets: 1, clears: 0, changes: 1 });

    // Five schedules over HTTP, each earlier than all before it: the earliest changes five times, five writes.
    const post = async (startAt: number): Promise<void> => {
      const res = await call("POST", `/v1/sessions/${r.name}/schedules`, {
        token: r.token,
        body: { input: "p", every: 3_600_000, startAt, mode: "nextRun" },
      });
      expect(res.status).toBe(201);
    };
    for (let k = 1; k <= 5; k++) {
      await post(bulkFirst - k * 1000);
      await settled(`earlier schedule ${k}`, bulkFirst - k * 1000, bulk.sets + k);
    }
    const earlier = await stats();
    expect(earlier.sets - bulk.sets).toBe(5);
    // Five more, each later than the earliest: not one write.
    for (const startAt of [bulkFirst + 500, bulkFirst - 4_500, bulkFirst + 9_000, t0 + 3_600_000, t0 + 86_400_000]) {
      await post(startAt);
    }
    const parked = () =>
      runInDurableObject(r.stub, (instance: SessionObject) => ({
        live: harnessOf(instance).driver.liveCount(),
        busy: harnessOf(instance).driver.busy,
      }));
    await until(async () => (await parked()).live === 1000 && !(await parked()).busy, "all 1,000 schedules asleep");
    expect(await alarm()).toBe(bulkFirst - 5000);
    expect(await stats()).toEqual(earlier);

    // Each occurrence moves the earliest due time on by one schedule: exactly one write per occurrence.
    for (let k = 5; k >= 1; k--) {
      await advanceTo(r, bulkFirst - k * 1000);
      await settled(`the alarm after occurrence ${6 - k}`, bulkFirst - (k - 1) * 1000, earlier.sets + 6 - k);
    }
    const after = await stats();
    expect(after.sets - earlier.sets).toBe(5);
    expect(after.clears).toBe(0);
    expect(after.sets).toBe(after.changes);
  };

  it(
    "1,000 schedules in one session: one alarm at the earliest due time, setAlarm only when the earliest changes",
    thousand("thousand", 20_000),
  );
  // 45 s: beyond the 30 s heartbeat, before the directory's activity update (a minute after creation).
  it(
    "1,000 schedules due beyond the heartbeat interval: setAlarm only when the earliest changes",
    thousand("thousand-far", 45_000),
  );
});
