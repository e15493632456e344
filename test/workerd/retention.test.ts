/**
 * Retention (docs/operations.md "Retention"): a template's `retention: { deleteAfterDays }` is captured by the
 * sessions created from it; each such session is deleted that many days after its last activity, on its own alarm,
 * after reporting `session.expired`, unless it has live work then (a parked tool call before its deadline, an
 * unpaused schedule). Time is the manual clock of the session fixtures (a day ahead of real time, so alarms never
 * fire on their own); alarms are run by hand with `runDurableObjectAlarm`. The receiver stands behind the host's
 * fetch seam.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { DAY_MS } from "../../src/worker/session/retention.js";
import { call, json, token, uniqueSession, until } from "./http-fixtures.js";
import { clockOf, ManualClock, ManualTime } from "./session-fixtures.js";
import { Receiver, registerEndpoint } from "./event-fixtures.js";

let time: ManualTime;
let receiver: Receiver;
let tenants = 0;
let TENANT = "retention";

beforeEach(() => {
  time = new ManualTime();
  receiver = new Receiver();
  setHostSeams({
    clock: () => new ManualClock(time),
    version: () => "v1",
    report: () => undefined,
    fetch: receiver.fetch,
  });
  tenants += 1;
  TENANT = `retention-${tenants}-${Date.now().toString(36)}`;
});

afterEach(async () => {
  await abortAllDurableObjects();
  setHostSeams({});
});

function objectOf(name: string): DurableObjectStub<SessionObject> {
  const ns = env.SESSIONS as DurableObjectNamespace<SessionObject>;
  return ns.get(ns.idFromName(`${TENANT}:${name}`));
}

async function operator(): Promise<string> {
  return token(TENANT, "operator");
}

async function putTemplate(name: string, body: Record<string, unknown>): Promise<Response> {
  return call("PUT", `/v1/templates/${name}`, { token: await operator(), body });
}

/** A session created over HTTP by a client, from `template` when given. */
async function create(label: string, body: Record<string, unknown>): Promise<{ name: string; t: string }> {
  const name = uniqueSession(label);
  const t = await token(TENANT, "client");
  const created = await call("PUT", `/v1/sessions/${name}`, { token: t, body });
  expect(created.status, await created.clone().text()).toBe(201);
  return { name, t };
}

interface Summary {
  retention?: { deleteAfterDays: number; expiresAt: number };
}

async function summary(name: string, t: string): Promise<{ status: number; body: Summary }> {
  const response = await call("GET", `/v1/sessions/${name}`, { token: t });
  return { status: response.status, body: response.status === 200 ? await json<Summary>(response) : {} };
}

async function listed(): Promise<string[]> {
  const response = await call("GET", "/v1/sessions?limit=100", { token: await operator() });
  expect(response.status).toBe(200);
  return (await json<{ items: { session: string }[] }>(response)).items.map((row) => row.session);
}

/** Move the shared time to `ms` through the session's own clock (waking its sleepers that are due). */
function advance(name: string, ms: number): Promise<void> {
  return runInDurableObject(objectOf(name), (instance: SessionObject) => clockOf(instance).advanceTo(ms));
}

/** Run the session's alarm (whatever it is armed for) at the current manual time. */
async function alarm(name: string): Promise<boolean> {
  return runDurableObjectAlarm(objectOf(name));
}

async function defineClientTool(name: string, timeoutMs: number): Promise<void> {
  const response = await call("PUT", `/v1/tools/${name}`, {
    token: await operator(),
    body: {
      description: `${name} (test)`,
      parameters: { type: "object", properties: { id: { type: "integer" } } },
      handler: { type: "client", timeoutMs },
    },
  });
  expect(response.status, await response.clone().text()).toBe(201);
}

describe("retention", () => {
  it("Retention deletes an idle session on its own alarm and never one with live work", async () => {
    const t0 = time.now;
    expect((await putTemplate("week", { retention: { deleteAfterDays: 3 } })).status).toBe(201);
    await registerEndpoint(TENANT, { url: "https://receiver.test/expired", events: ["session.expired"] });
    await defineClientTool("ask", 7 * DAY_MS);

    // Idle: nothing but its creation.
    const idle = await create("idle", { template: "week" });
    expect((await summary(idle.name, idle.t)).body.retention).toEqual({
      deleteAfterDays: 3,
      expiresAt: t0 + 3 * DAY_MS,
    });
    // Live work: a tool call parked on a pending item whose deadline is 7 days away.
    const parked = await create("parked", { template: "week", selectedTools: ["ask"] });
    const sent = await call("POST", `/v1/sessions/${parked.name}/conversations/root/inputs`, {
      token: parked.t,
      body: { input: '/call ask {"id":1}' },
    });
    expect(sent.status).toBe(201);
    await until(async () => {
      const response = await call("GET", `/v1/sessions/${parked.name}/pending`, { token: parked.t });
      return (await json<{ items: unknown[] }>(response)).items.length === 1 ? true : undefined;
    }, "the pending item");
    // Live work: an unpaused schedule (next run 30 days away, so it commits nothing meanwhile).
    const scheduled = await create("scheduled", { template: "week" });
    const every = 30 * DAY_MS;
    const made = await call("POST", `/v1/sessions/${scheduled.name}/schedules`, {
      token: scheduled.t,
      body: { input: "tick", every },
    });
    expect(made.status, await made.clone().text()).toBe(201);
    // A paused schedule is not live work.
    const paused = await create("paused", { template: "week" });
    const schedule = await json<{ id: number }>(
      await call("POST", `/v1/sessions/${paused.name}/schedules`, { token: paused.t, body: { input: "tick", every } }),
    );
    const patched = await call("PATCH", `/v1/sessions/${paused.name}/schedules/${schedule.id}`, {
      token: paused.t,
      body: { paused: true },
    });
    expect(patched.status).toBe(200);
    const before = await listed();
    for (const s of [idle, parked, scheduled, paused]) expect(before).toContain(s.name);

    // A day before the expiry: the alarm (if run early) deletes nothing.
    await advance(idle.name, t0 + 2 * DAY_MS);
    await alarm(idle.name);
    expect((await summary(idle.name, idle.t)).status).toBe(200);

    // Past the expiry, each session's own alarm.
    await advance(idle.name, t0 + 3 * DAY_MS + 5_000);
    for (const s of [idle, parked, scheduled, paused]) expect(await alarm(s.name)).toBe(true);

    expect((await summary(idle.name, idle.t)).status).toBe(404);
    expect((await summary(paused.name, paused.t)).status).toBe(404);
    expect((await summary(parked.name, parked.t)).status).toBe(200);
    expect((await summary(scheduled.name, scheduled.t)).status).toBe(200);
    const after = await listed();
    expect(after).not.toContain(idle.name);
    expect(after).not.toContain(paused.name);
    expect(after).toContain(parked.name);
    expect(after).toContain(scheduled.name);
    // The parked call is still waiting, and the schedule still active.
    const items = await json<{ items: unknown[] }>(
      await call("GET", `/v1/sessions/${parked.name}/pending`, { token: parked.t }),
    );
    expect(items.items).toHaveLength(1);

    // session.expired for the two deleted sessions, none for the kept ones.
    const expired = receiver.received.filter((request) => request.event.type === "session.expired");
    expect(expired.map((request) => request.event.data["session"]).sort()).toEqual([idle.name, paused.name].sort());
    expect(expired.find((request) => request.event.data["session"] === idle.name)?.event.data).toMatchObject({
      deleteAfterDays: 3,
      lastActivityAt: t0,
      expiredAt: t0 + 3 * DAY_MS + 5_000,
    });

    // The kept ones are looked at again later (before the item's deadline); still live, still kept.
    await advance(parked.name, t0 + 6 * DAY_MS + 10_000);
    expect(await alarm(parked.name)).toBe(true);
    expect(await alarm(scheduled.name)).toBe(true);
    expect((await summary(parked.name, parked.t)).status).toBe(200);
    expect((await summary(scheduled.name, scheduled.t)).status).toBe(200);
  });

  it("activity pushes the expiry", async () => {
    const t0 = time.now;
    expect((await putTemplate("short", { retention: { deleteAfterDays: 2 } })).status).toBe(201);
    const s = await create("active", { template: "short" });
    await advance(s.name, t0 + DAY_MS);
    const sent = await call("POST", `/v1/sessions/${s.name}/conversations/root/inputs?wait=20`, {
      token: s.t,
      body: { input: "hello" },
    });
    expect(sent.status).toBe(201);
    const view = (await summary(s.name, s.t)).body.retention;
    expect(view?.deleteAfterDays).toBe(2);
    expect(view?.expiresAt).toBeGreaterThanOrEqual(t0 + 3 * DAY_MS);

    // The alarm armed for the first expiry fires early: it only re-arms.
    await advance(s.name, t0 + 2 * DAY_MS + 5_000);
    expect(await alarm(s.name)).toBe(true);
    expect((await summary(s.name, s.t)).status).toBe(200);
    // Past the pushed expiry, it goes.
    await advance(s.name, t0 + 3 * DAY_MS + 5_000);
    expect(await alarm(s.name)).toBe(true);
    expect((await summary(s.name, s.t)).status).toBe(404);
    expect(await listed()).not.toContain(s.name);
  });

  it("a session from a template without retention, or from none, never expires", async () => {
    const t0 = time.now;
    expect((await putTemplate("forever", { model: "echo" })).status).toBe(201);
    const fromTemplate = await create("forever", { template: "forever" });
    const plain = await create("plain", {});
    for (const s of [fromTemplate, plain]) expect((await summary(s.name, s.t)).body.retention).toBeUndefined();
    await advance(plain.name, t0 + 4000 * DAY_MS);
    for (const s of [fromTemplate, plain]) {
      await alarm(s.name);
      expect((await summary(s.name, s.t)).status).toBe(200);
    }
  });

  it("the tenant's default applies to sessions without a template's own; a template's null opts out", async () => {
    const t0 = time.now;
    const op = await operator();
    expect(await json(await call("GET", "/v1/retention", { token: op }))).toEqual({ retention: null });
    const refused = await call("PUT", "/v1/retention", { token: op, body: { retention: { deleteAfterDays: 0 } } });
    expect(refused.status).toBe(422);
    expect(await json(refused)).toMatchObject({ code: "invalid_retention", field: "retention.deleteAfterDays" });
    const unknownField = await call("PUT", "/v1/retention", { token: op, body: { retention: { days: 2 } } });
    expect(unknownField.status).toBe(422);
    expect(await json(unknownField)).toMatchObject({ code: "invalid_retention", field: "retention.deleteAfterDays" });
    // Refused, it wrote nothing.
    expect(await json(await call("GET", "/v1/retention", { token: op }))).toEqual({ retention: null });
    const byClient = await call("PUT", "/v1/retention", {
      token: await token(TENANT, "client"),
      body: { retention: { deleteAfterDays: 2 } },
    });
    expect(byClient.status).toBe(403);
    const set = await call("PUT", "/v1/retention", { token: op, body: { retention: { deleteAfterDays: 2 } } });
    expect(set.status).toBe(200);
    expect(await json(set)).toEqual({ retention: { deleteAfterDays: 2 } });
    expect(await json(await call("GET", "/v1/retention", { token: op }))).toEqual({
      retention: { deleteAfterDays: 2 },
    });

    expect((await putTemplate("never", { retention: null })).status).toBe(201);
    expect((await putTemplate("five", { retention: { deleteAfterDays: 5 } })).status).toBe(201);
    expect((await putTemplate("plain", {})).status).toBe(201);
    const bare = await create("bare", {});
    const never = await create("never", { template: "never" });
    const five = await create("five", { template: "five" });
    const plain = await create("plain", { template: "plain" });
    expect((await summary(bare.name, bare.t)).body.retention).toEqual({
      deleteAfterDays: 2,
      expiresAt: t0 + 2 * DAY_MS,
    });
    expect((await summary(never.name, never.t)).body.retention).toBeUndefined();
    expect((await summary(five.name, five.t)).body.retention).toEqual({
      deleteAfterDays: 5,
      expiresAt: t0 + 5 * DAY_MS,
    });
    expect((await summary(plain.name, plain.t)).body.retention?.deleteAfterDays).toBe(2);

    // Clearing the default changes no session that exists.
    expect((await call("PUT", "/v1/retention", { token: op, body: { retention: null } })).status).toBe(200);
    await advance(bare.name, t0 + 2 * DAY_MS + 5_000);
    for (const s of [bare, never, five, plain]) await alarm(s.name);
    expect((await summary(bare.name, bare.t)).status).toBe(404);
    expect((await summary(plain.name, plain.t)).status).toBe(404);
    expect((await summary(never.name, never.t)).status).toBe(200);
    expect((await summary(five.name, five.t)).status).toBe(200);
    // A session created now has none.
    const later = await create("later", {});
    expect((await summary(later.name, later.t)).body.retention).toBeUndefined();
  });

  it("a session created without a template keeps the tenant's default the directory acknowledges its row with", async () => {
    const t0 = time.now;
    const op = await operator();
    const set = await call("PUT", "/v1/retention", { token: op, body: { retention: { deleteAfterDays: 2 } } });
    expect(set.status).toBe(200);
    // The directory refuses the new session's first row: the create asked it nothing before, so the default is
    // not known yet, and the session does not expire meanwhile.
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(TENANT));
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      instance.refusing = 1;
    });
    const bare = await create("unacknowledged", {});
    expect((await summary(bare.name, bare.t)).body.retention).toBeUndefined();
    expect(await listed()).not.toContain(bare.name);
    // The retry from the session's alarm is acknowledged with the default.
    await advance(bare.name, t0 + 2_000);
    expect(await alarm(bare.name)).toBe(true);
    expect(await listed()).toContain(bare.name);
    expect((await summary(bare.name, bare.t)).body.retention).toEqual({
      deleteAfterDays: 2,
      expiresAt: t0 + 2 * DAY_MS,
    });
    // A later default changes it no more, whatever the directory acknowledges afterwards.
    expect(
      (await call("PUT", "/v1/retention", { token: op, body: { retention: { deleteAfterDays: 9 } } })).status,
    ).toBe(200);
    const relabelled = await call("PATCH", `/v1/sessions/${bare.name}`, { token: bare.t, body: { title: "later" } });
    expect(relabelled.status).toBe(200);
    expect((await summary(bare.name, bare.t)).body.retention?.deleteAfterDays).toBe(2);
    await advance(bare.name, t0 + 2 * DAY_MS + 5_000);
    expect(await alarm(bare.name)).toBe(true);
    expect((await summary(bare.name, bare.t)).status).toBe(404);
  });

  it("an expired session is deleted only once its session.expired is delivered", async () => {
    const t0 = time.now;
    const url = "https://receiver.test/failing";
    receiver.replies.set(url, 503);
    await registerEndpoint(TENANT, { url, events: ["session.expired"] });
    expect((await putTemplate("day", { retention: { deleteAfterDays: 1 } })).status).toBe(201);
    const s = await create("undelivered", { template: "day" });
    await advance(s.name, t0 + DAY_MS + 5_000);
    expect(await alarm(s.name)).toBe(true);
    expect(receiver.to(url).map((request) => request.event.type)).toEqual(["session.expired"]);
    // Not delivered: the session stays (its expiry committed), and GET still answers.
    expect((await summary(s.name, s.t)).status).toBe(200);
    expect(await listed()).toContain(s.name);
    // The endpoint answers again: the next attempt delivers, and the session goes.
    receiver.replies.set(url, 200);
    for (let round = 0; round < 5 && (await summary(s.name, s.t)).status === 200; round += 1) {
      await advance(s.name, time.now + 10 * 60_000);
      await alarm(s.name);
    }
    expect((await summary(s.name, s.t)).status).toBe(404);
    const sent = receiver.to(url);
    expect(sent.at(-1)?.status).toBe(200);
    // One event, retried under the same id.
    expect(new Set(sent.map((request) => request.event.id)).size).toBe(1);
    expect(await listed()).not.toContain(s.name);
  });

  it("activity after the expiry is committed, while its event waits for delivery, keeps the session", async () => {
    const t0 = time.now;
    const url = "https://receiver.test/down";
    receiver.replies.set(url, 503);
    await registerEndpoint(TENANT, { url, events: ["session.expired"] });
    expect((await putTemplate("brief", { retention: { deleteAfterDays: 1 } })).status).toBe(201);
    const s = await create("revived", { template: "brief" });
    await advance(s.name, t0 + DAY_MS + 5_000);
    expect(await alarm(s.name)).toBe(true);
    expect(receiver.to(url).map((request) => request.event.type)).toEqual(["session.expired"]);
    // The user comes back before the event is delivered: an answered input.
    const sent = await call("POST", `/v1/sessions/${s.name}/conversations/root/inputs?wait=20`, {
      token: s.t,
      body: { input: "still here" },
    });
    expect(sent.status).toBe(201);
    // The endpoint answers again; the event goes out, but the session stays, with a new expiry.
    receiver.replies.set(url, 200);
    for (let round = 0; round < 5; round += 1) {
      await advance(s.name, time.now + 10 * 60_000);
      await alarm(s.name);
    }
    expect(receiver.to(url).at(-1)?.status).toBe(200);
    const kept = await summary(s.name, s.t);
    expect(kept.status).toBe(200);
    expect(kept.body.retention?.expiresAt).toBeGreaterThan(t0 + 2 * DAY_MS);
    expect(await listed()).toContain(s.name);
    // Idle again past the new expiry, it goes.
    const next = kept.body.retention?.expiresAt ?? 0;
    await advance(s.name, next + 5_000);
    expect(await alarm(s.name)).toBe(true);
    for (let round = 0; round < 3 && (await summary(s.name, s.t)).status === 200; round += 1) {
      await advance(s.name, time.now + 2 * 60_000);
      await alarm(s.name);
    }
    expect((await summary(s.name, s.t)).status).toBe(404);
  });

  it("Retention never deletes an input accepted during the expiry", async () => {
    const t0 = time.now;
    const url = "https://receiver.test/slow";
    await registerEndpoint(TENANT, { url, events: ["session.expired"] });
    expect((await putTemplate("short", { retention: { deleteAfterDays: 1 } })).status).toBe(201);
    // The receiver holds the delivery of session.expired until the test lets it answer (looking every few ms: the
    // session's own timer waits, not a promise of the test's).
    const gate = { reached: false, released: false };
    setHostSeams({
      clock: () => new ManualClock(time),
      version: () => "v1",
      report: () => undefined,
      fetch: async (request) => {
        if (request.url === url) {
          gate.reached = true;
          while (!gate.released) await new Promise((resolve) => setTimeout(resolve, 5));
        }
        return receiver.fetch(request);
      },
    });
    const s = await create("during", { template: "short" });
    await advance(s.name, t0 + DAY_MS + 5_000);
    const expiring = alarm(s.name);
    await until(async () => (gate.reached ? true : undefined), "session.expired on its way");
    // The user comes back while the event is being delivered: the input is accepted and answered.
    const sent = await call("POST", `/v1/sessions/${s.name}/conversations/root/inputs?wait=20`, {
      token: s.t,
      body: { input: "still here" },
    });
    expect(sent.status, await sent.clone().text()).toBe(201);
    const answered = await json<{ inputId: number; status: string }>(sent);
    expect(answered.status).toBe("done");
    gate.released = true;
    await expiring;
    expect(receiver.to(url).map((request) => [request.event.type, request.status])).toEqual([["session.expired", 200]]);
    // The session and its answered input stay, with a new expiry from that activity.
    const kept = await summary(s.name, s.t);
    expect(kept.status).toBe(200);
    const input = await call("GET", `/v1/sessions/${s.name}/inputs/${answered.inputId}`, { token: s.t });
    expect(input.status).toBe(200);
    expect(await json(input)).toMatchObject({ outputText: "still here" });
    expect(await listed()).toContain(s.name);
    // Later alarms keep it too (the expiry was cancelled, not merely put off).
    for (let round = 0; round < 3; round += 1) {
      await advance(s.name, time.now + 10 * 60_000);
      await alarm(s.name);
    }
    expect((await summary(s.name, s.t)).status).toBe(200);
    expect((await summary(s.name, s.t)).body.retention?.expiresAt).toBeGreaterThan(t0 + DAY_MS + 5_000);
  });

  it("refuses bad retention values, naming the field, and writes nothing", async () => {
    for (const retention of [
      { deleteAfterDays: 0 },
      { deleteAfterDays: 3651 },
      { deleteAfterDays: 1.5 },
      { deleteAfterDays: "7" },
      {},
    ]) {
      const response = await putTemplate("bad", { retention });
      expect(response.status, JSON.stringify(retention)).toBe(422);
      const problem = await json<{ code: string; field?: string }>(response);
      expect(problem).toMatchObject({ code: "invalid_template", field: "retention.deleteAfterDays" });
    }
    const unknown = await putTemplate("bad", { retention: { deleteAfterDays: 7, hours: 1 } });
    expect(unknown.status).toBe(422);
    expect(await json(unknown)).toMatchObject({ code: "invalid_template", field: "retention.hours" });
    expect((await call("GET", "/v1/templates/bad", { token: await operator() })).status).toBe(404);
    // A session PUT does not take retention itself: it comes from a template.
    const direct = await call("PUT", `/v1/sessions/${uniqueSession("direct")}`, {
      token: await token(TENANT, "client"),
      body: { retention: { deleteAfterDays: 7 } },
    });
    expect(direct.status).toBe(400);
    expect(await json(direct)).toMatchObject({ field: "retention" });
    const good = await putTemplate("good", { retention: { deleteAfterDays: 3650 } });
    expect(good.status).toBe(201);
    expect(await json(good)).toMatchObject({ retention: { deleteAfterDays: 3650 } });
  });
});
