/**
 * Limits and usage over HTTP (docs/users.md "Limits and usage"): PUT/GET /v1/limits, 429 rate_limited
 * with Retry-After at admission (nothing accepted, nothing written), quotas under concurrent requests,
 * reservations keyed by the Idempotency-Key, tokens settled from the model's usage, turn slots released
 * when a turn ends, and the metered figures of GET /v1/usage and GET /v1/me/usage.
 */
import { SELF, abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { signWebhook, webhookSecret } from "../../src/worker/crypto/webhooks.js";
import { BASE, call, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";
import { createBody, putUserTemplate, roleOf } from "./users-fixtures.js";
import type { Env } from "../../src/worker/env.js";
import { sessionObjectName } from "../../src/worker/identity/owner.js";
import type { LimitsObject, SettleReport } from "../../src/worker/limits/object.js";
import { shardOf, type ShardRef } from "../../src/worker/limits/shards.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { AlarmStats } from "../../src/worker/session/alarm-plan.js";
import type { SessionObject } from "../../src/worker/session/object.js";

function sessionObject(tenant: string, session: string): DurableObjectStub {
  const namespace = (env as unknown as Env).SESSIONS;
  return namespace.get(namespace.idFromName(sessionObjectName(tenant, session)));
}

/**
 * The shard of the tenant's user `sub` answers every report with a failure while `failing()` says so (a lost report).
 * RPC finds methods on the class, so the seam wraps the prototype's `settle` (for that shard's object only);
 * the returned function restores it.
 */
async function failReports(tenant: string, failing: () => boolean, sub = "alice"): Promise<() => void> {
  const namespace = (env as unknown as Env).LIMITS;
  const id = namespace.idFromName(`${tenant}\n${shardOf(tenant, sub, undefined).key}`);
  return runInDurableObject(namespace.get(id) as DurableObjectStub<LimitsObject>, (instance: LimitsObject, state) => {
    const prototype = Object.getPrototypeOf(instance) as LimitsObject;
    const settle = prototype.settle;
    prototype.settle = function (this: LimitsObject, reports: readonly SettleReport[], at?: ShardRef) {
      if (state.id.equals(id) && failing()) throw new Error("the report was lost");
      return settle.call(this, reports, at);
    };
    return () => {
      prototype.settle = settle;
    };
  });
}

/**
 * The shard of the tenant's user `sub` holds the answer of its first `admitInput` (after admitting it: `gate.reached`)
 * until `gate.released`, looking every few ms (the shard's own timer: a promise of the test's request context could not
 * be awaited there). RPC finds methods on the class, so the seam wraps the prototype's `admitInput` (for that shard's
 * object only); the returned function restores it.
 */
async function holdFirstAdmission(
  tenant: string,
  sub: string,
  gate: { reached: boolean; released: boolean },
): Promise<() => void> {
  const namespace = (env as unknown as Env).LIMITS;
  const id = namespace.idFromName(`${tenant}\n${shardOf(tenant, sub, undefined).key}`);
  return runInDurableObject(namespace.get(id) as DurableObjectStub<LimitsObject>, (instance: LimitsObject, state) => {
    const prototype = Object.getPrototypeOf(instance) as LimitsObject;
    const admitInput = prototype.admitInput;
    let held = false;
    prototype.admitInput = async function (this: LimitsObject, ...args: Parameters<LimitsObject["admitInput"]>) {
      const answer = await admitInput.apply(this, args);
      if (state.id.equals(id) && !held) {
        held = true;
        gate.reached = true;
        while (!gate.released) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return answer;
    };
    return () => {
      prototype.admitInput = admitInput;
    };
  });
}

/** Kill the session object (the platform's own reset: nothing of the instance survives). */
async function killSession(tenant: string, session: string): Promise<void> {
  await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
    state.abort("killed by the test");
  }).catch(() => undefined);
}

afterEach(async () => {
  await abortAllDurableObjects();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `limits-${label}-${Date.now().toString(36)}-${tenants}`;
}

/**
 * Whether a LimitsObject call is one the Worker or a session made (not the test's own usage reads, which ask the
 * user's shard to forward first, nor a shard's batched forwards and leases to the tenant's object).
 */
function sessionCall(method: string): boolean {
  return !["usage", "flush", "forward", "lease", "totals"].includes(method);
}

const today = (): string => new Date().toISOString().slice(0, 10);

async function setLimits(tenant: string, limits: unknown): Promise<Response> {
  return call("PUT", "/v1/limits", { token: await token(tenant, "operator"), body: limits });
}

async function userToken(tenant: string, sub: string): Promise<string> {
  return token(tenant, "user", { sub });
}

/**
 * Create a session with `jwt`: a user token's from the tenant's user template (put by the operator, who is not
 * limited).
 */
async function createSession(tenant: string, jwt: string, config: Record<string, unknown> = {}): Promise<string> {
  const session = uniqueSession("lim");
  if (roleOf(jwt) === "user") await putUserTemplate(tenant);
  const response = await call("PUT", `/v1/sessions/${session}`, { token: jwt, body: createBody(jwt, config) });
  expect(response.status).toBe(201);
  return session;
}

function send(session: string, jwt: string, input: string, key?: string, wait?: number): Promise<Response> {
  return call("POST", `/v1/sessions/${session}/conversations/root/inputs${wait === undefined ? "" : `?wait=${wait}`}`, {
    token: jwt,
    body: { input },
    ...(key === undefined ? {} : { headers: { "idempotency-key": key } }),
  });
}

interface UsageDay {
  sub: string | null;
  day: string;
  inputs: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  costUsd: number;
}

interface UsageModelDay {
  sub: string | null;
  day: string;
  model: string;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  costUsd: number;
}

async function usage(
  tenant: string,
  path: string,
  jwt?: string,
): Promise<{ from: string; to: string; items: UsageDay[]; models: UsageModelDay[] }> {
  const response = await call("GET", path, { token: jwt ?? (await token(tenant, "operator")) });
  expect(response.status, await response.clone().text()).toBe(200);
  return json(response);
}

describe("limits", () => {
  it("PUT /v1/limits replaces the limits, GET reads them; invalid limits are 422 naming the field and change nothing", async () => {
    const tenant = uniqueTenant("config");
    const operator = await token(tenant, "operator");
    expect(await json(await call("GET", "/v1/limits", { token: operator }))).toEqual({ user: {}, tenant: {} });
    const put = await setLimits(tenant, {
      user: { inputsPerDay: 10, concurrentTurns: 2 },
      tenant: { costPerMonthUsd: 12.5 },
    });
    expect(put.status).toBe(200);
    const saved = await json(put);
    expect(saved).toMatchObject({ user: { inputsPerDay: 10, concurrentTurns: 2 }, tenant: { costPerMonthUsd: 12.5 } });
    for (const [limits, field] of [
      [{ user: { inputsPerDay: -1 } }, "user.inputsPerDay"],
      [{ user: { inputsPerDay: 1.5 } }, "user.inputsPerDay"],
      [{ tenant: { requestsPerMinute: "10" } }, "tenant.requestsPerMinute"],
      [{ tenant: { perHour: 3 } }, "tenant.perHour"],
      [{ users: {} }, "users"],
    ] as const) {
      const response = await setLimits(tenant, limits);
      expect(response.status, JSON.stringify(limits)).toBe(422);
      expect(await json(response)).toMatchObject({ code: "invalid_limits", field });
    }
    expect(await json(await call("GET", "/v1/limits", { token: operator }))).toEqual(saved);
    // Clearing: an empty body object limits nothing.
    expect(await json(await setLimits(tenant, {}))).toMatchObject({ user: {}, tenant: {} });
  });

  it("Over the limit is 429 with Retry-After and writes nothing", async () => {
    const tenant = uniqueTenant("over");
    expect((await setLimits(tenant, { user: { inputsPerDay: 1 }, tenant: { inputsPerDay: 3 } })).status).toBe(200);
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    expect((await send(session, alice, "first", "k-1", 10)).status).toBe(201);
    const seq = await lastSeq(tenant, session);
    const refused = await send(session, alice, "second", "k-2");
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 86_400).toBe(true);
    expect(await json(refused)).toMatchObject({ code: "rate_limited", field: "user.inputsPerDay", retryAfter });
    // Nothing accepted, nothing written: the session is as it was, the key names no acceptance.
    expect(await lastSeq(tenant, session)).toBe(seq);
    expect((await call("GET", `/v1/sessions/${session}/acceptances/k-2`, { token: alice })).status).toBe(404);
    // The count did not move either; another user has a quota of their own until the tenant's runs out.
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([1]);
    const bob = await userToken(tenant, "bob");
    const bobs = await createSession(tenant, bob);
    expect((await send(bobs, bob, "one")).status).toBe(201);
    const carol = await userToken(tenant, "carol");
    const carols = await createSession(tenant, carol);
    expect((await send(carols, carol, "one")).status).toBe(201);
    const dave = await userToken(tenant, "dave");
    const daves = await createSession(tenant, dave);
    const tenantRefused = await send(daves, dave, "one");
    expect(tenantRefused.status).toBe(429);
    expect(await json(tenantRefused)).toMatchObject({ code: "rate_limited", field: "tenant.inputsPerDay" });
    expect(await lastSeq(tenant, daves)).toBe(await lastSeqAfterCreate(tenant));
  });

  it("requestsPerMinute counts a user's API requests: over it is 429 naming user.requestsPerMinute; operators are not counted", async () => {
    const tenant = uniqueTenant("rpm");
    await setLimits(tenant, { user: { requestsPerMinute: 3 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await call("GET", `/v1/sessions/${session}`, { token: alice })).status);
    // The PUT that created the session was the minute's first request.
    expect(statuses).toEqual([200, 200, 429]);
    const refused = await call("GET", `/v1/sessions/${session}`, { token: alice });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    expect(await json(refused)).toMatchObject({ field: "user.requestsPerMinute" });
    const bob = await userToken(tenant, "bob");
    // Another user of the tenant has a minute of their own (their own listing; alice's session is not theirs).
    expect((await call("GET", "/v1/sessions", { token: bob })).status).toBe(200);
    const operator = await token(tenant, "operator");
    for (let i = 0; i < 5; i++) expect((await call("GET", "/v1/limits", { token: operator })).status).toBe(200);
  });

  it("Concurrent requests cannot overrun a quota", async () => {
    const tenant = uniqueTenant("race");
    const quota = 4;
    await setLimits(tenant, { user: { inputsPerDay: quota } });
    const alice = await userToken(tenant, "alice");
    const sessions = [
      await createSession(tenant, alice),
      await createSession(tenant, alice),
      await createSession(tenant, alice),
    ];
    const responses = await Promise.all(
      Array.from({ length: 18 }, (_, i) => send(sessions[i % sessions.length] ?? "", alice, `input ${i}`, `race-${i}`)),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201).length).toBe(quota);
    expect(statuses.filter((s) => s === 429).length).toBe(18 - quota);
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([quota]);
    // And the sessions hold exactly that many user inputs between them.
    let accepted = 0;
    for (const session of sessions) {
      for (let i = 0; i < 18; i++) {
        if ((await call("GET", `/v1/sessions/${session}/acceptances/race-${i}`, { token: alice })).status === 200)
          accepted += 1;
      }
    }
    expect(accepted).toBe(quota);
  }, 60_000);

  it("Per-user limits stay exact under concurrent inputs from many users", async () => {
    const tenant = uniqueTenant("many");
    const quota = 3;
    await setLimits(tenant, { user: { inputsPerDay: quota } });
    const users = ["ann", "bo", "cy", "di", "ed", "fay"];
    const jwts = new Map<string, string>();
    const sessions = new Map<string, string[]>();
    for (const sub of users) {
      const jwt = await userToken(tenant, sub);
      jwts.set(sub, jwt);
      sessions.set(sub, [await createSession(tenant, jwt), await createSession(tenant, jwt)]);
    }
    // Every user's inputs interleaved with everyone else's, all in flight at once: 7 per user against a quota of 3.
    const sends = Array.from({ length: 7 }, (_, i) =>
      users.map((sub) => ({ sub, i, session: sessions.get(sub)?.[i % 2] ?? "" })),
    ).flat();
    const responses = await Promise.all(
      sends.map(({ sub, i, session }) => send(session, jwts.get(sub) ?? "", `${sub} ${i}`, `${sub}-${i}`)),
    );
    for (const sub of users) {
      const statuses = responses.filter((_, k) => sends[k]?.sub === sub).map((r) => r.status);
      expect(statuses.filter((s) => s === 201).length, sub).toBe(quota);
      expect(statuses.filter((s) => s === 429).length, sub).toBe(7 - quota);
      expect(
        (await usage(tenant, `/v1/usage?sub=${sub}`)).items.map((d) => d.inputs),
        sub,
      ).toEqual([quota]);
      // The sessions hold exactly the admitted inputs: none admitted without being counted, none counted twice.
      let accepted = 0;
      for (const { i, session } of sends.filter((s) => s.sub === sub)) {
        const seen = await call("GET", `/v1/sessions/${session}/acceptances/${sub}-${i}`, {
          token: jwts.get(sub) ?? "",
        });
        if (seen.status === 200) accepted += 1;
      }
      expect(accepted, sub).toBe(quota);
    }
    // A user at the quota does not hold back another: a new user still has the whole quota.
    const late = await userToken(tenant, "gus");
    const lateSession = await createSession(tenant, late);
    expect((await send(lateSession, late, "first", "gus-0")).status).toBe(201);
  }, 90_000);

  it("A tenant's inputs are admitted by its users' shards, not by the tenant's object", async () => {
    const tenant = uniqueTenant("spread");
    await setLimits(tenant, { user: { inputsPerDay: 100 }, tenant: { inputsPerDay: 1_000, concurrentTurns: 500 } });
    const users = ["ann", "bo", "cy", "di", "ed", "fay", "gus", "hal"];
    const sessions = new Map<string, { jwt: string; session: string }>();
    for (const sub of users) {
      const jwt = await userToken(tenant, sub);
      sessions.set(sub, { jwt, session: await createSession(tenant, jwt) });
    }
    // Which object each call reached: a shard (by key) or the tenant's own (`tenant`).
    const calls: { method: string; shard: string }[] = [];
    setHostSeams({
      limitsCall: (t, method, shard) => void (t === tenant && calls.push({ method, shard: shard ?? "tenant" })),
    });
    try {
      const sends = users.flatMap((sub) => Array.from({ length: 6 }, (_, i) => ({ sub, i })));
      const responses = await Promise.all(
        sends.map(({ sub, i }) => {
          const { jwt, session } = sessions.get(sub) ?? { jwt: "", session: "" };
          return send(session, jwt, `${sub} ${i}`, `${sub}-${i}`);
        }),
      );
      expect(responses.map((r) => r.status)).toEqual(sends.map(() => 201));
    } finally {
      setHostSeams({});
    }
    const admissions = calls.filter((c) => c.method === "admitInput");
    expect(admissions.length).toBe(48);
    // Every input was admitted by its user's shard: eight shards, six each; none by the tenant's object.
    const byShard = new Map<string, number>();
    for (const { shard } of admissions) byShard.set(shard, (byShard.get(shard) ?? 0) + 1);
    expect([...byShard.keys()]).not.toContain("tenant");
    expect([...byShard.values()]).toEqual(users.map(() => 6));
    // The tenant's object only leased: one call leases inputs and slots together, and each shard's chunk doubles
    // (1, 2, 4 covers six inputs), so at most three calls a shard, half the inputs.
    const leases = calls.filter((c) => c.shard === "tenant" && c.method === "lease").length;
    expect(leases).toBeGreaterThan(0);
    expect(leases).toBeLessThanOrEqual(users.length * 3);
    expect(calls.filter((c) => c.shard === "tenant" && c.method.startsWith("admit"))).toEqual([]);
    // And the tenant's totals are the shards' forwarded counts.
    await until(
      async () => {
        const days = (await usage(tenant, "/v1/usage")).items;
        return days.find((d) => d.sub === null)?.inputs === 48 ? days : undefined;
      },
      "the shards' counts to reach the tenant's totals",
      1_000,
    );
  }, 60_000);

  it("A granted user's input counts against that user and releases that user's turn slot", async () => {
    const tenant = uniqueTenant("granted");
    await setLimits(tenant, { user: { concurrentTurns: 1, inputsPerDay: 10 } });
    const alice = await userToken(tenant, "alice");
    const shared = await createSession(tenant, alice);
    // Bob may use alice's session (a grant in his token) and has one of his own.
    const bob = await token(tenant, "user", { sub: "bob", sessions: [shared] });
    const own = await createSession(tenant, await userToken(tenant, "bob"));
    const first = await send(shared, bob, "bob in alice's session", "bob-1", 10);
    expect(await json(first)).toMatchObject({ status: "done" });
    // The input was bob's: his slot was taken in his own shard, and the turn's end released it there.
    const mine = await until(
      async () => {
        const response = await send(own, bob, "bob in his own session", "bob-2");
        return response.status === 201 ? response : undefined;
      },
      "bob's turn slot to be released",
      600,
    );
    expect(await json(mine)).toMatchObject({ duplicate: false });
    // Alice's own limits are untouched by bob's inputs.
    expect((await send(shared, alice, "alice", "alice-1")).status).toBe(201);
    const days = async (sub: string): Promise<UsageDay[]> => (await usage(tenant, `/v1/usage?sub=${sub}`)).items;
    expect((await days("bob")).map((d) => d.inputs)).toEqual([2]);
    expect((await days("alice")).map((d) => d.inputs)).toEqual([1]);
    // The tokens of bob's turn in alice's session count for bob.
    await until(
      async () => ((await days("bob"))[0]?.totalTokens ?? 0) > 0 || undefined,
      "bob's tokens to be counted",
      600,
    );
  }, 30_000);

  it("a retried request with the same Idempotency-Key does not reserve twice", async () => {
    const tenant = uniqueTenant("retry");
    await setLimits(tenant, { user: { inputsPerDay: 2 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    expect((await send(session, alice, "one", "same")).status).toBe(201);
    const retried = await send(session, alice, "one", "same");
    expect(retried.status).toBe(200);
    expect(await json(retried)).toMatchObject({ duplicate: true });
    expect((await send(session, alice, "two", "other")).status).toBe(201);
    // At the quota: a new request is refused, a retry of an accepted one still answers its acceptance.
    expect((await send(session, alice, "three", "third")).status).toBe(429);
    expect((await send(session, alice, "one", "same")).status).toBe(200);
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([2]);
    // A request the session refuses (another body under a used key: 422) gives its reservation back.
    await setLimits(tenant, { user: { inputsPerDay: 3 } });
    expect((await send(session, alice, "a different body", "other")).status).toBe(422);
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([2]);
  });

  it("Concurrent requests with one key and different bodies keep the quota exact", async () => {
    const tenant = uniqueTenant("same-key");
    await setLimits(tenant, { user: { inputsPerDay: 2 } });
    const alice = await userToken(tenant, "alice");
    // A paced model: the accepted input's turn still runs when the next inputs come (its report, which would count an
    // input no reservation holds, has not reached the shard).
    const session = await createSession(tenant, alice, {
      template: await putUserTemplate(tenant, "slow", { model: "echo-slow" }),
    });
    const long = "an input the paced echo model takes a while to stream back, long enough to outlast the next inputs";
    // The first request reserves the key at alice's shard, but its answer is held there until the second request (the
    // same key, another body) was admitted on that reservation and accepted; the first is then refused (422).
    const gate = { reached: false, released: false };
    const restore = await holdFirstAdmission(tenant, "alice", gate);
    try {
      const first = send(session, alice, "the first body", "shared");
      await until(async () => (gate.reached ? true : undefined), "the first admission at the shard");
      const second = await send(session, alice, long, "shared");
      expect(second.status, await second.clone().text()).toBe(201);
      gate.released = true;
      const refused = await first;
      expect(refused.status, await refused.clone().text()).toBe(422);
      expect(await json(refused)).toMatchObject({ code: "idempotency_key_reused" });
    } finally {
      gate.released = true;
      restore();
    }
    // The refusal gave back nothing of the accepted input's: one more input fits the day's two, a third does not.
    expect((await send(session, alice, "two", "next")).status).toBe(201);
    const over = await send(session, alice, "three", "over");
    expect(over.status).toBe(429);
    expect(await json(over)).toMatchObject({ field: "user.inputsPerDay" });
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([2]);
  });

  it("A retry of an accepted input makes no limits call", async () => {
    const tenant = uniqueTenant("retry-calls");
    await setLimits(tenant, { user: { inputsPerDay: 5 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    // What the Worker asks the tenant's LimitsObject while a request is served (the session's own usage
    // reports, `settle`, follow its commits, not a request).
    const calls: string[] = [];
    setHostSeams({
      limitsCall: (t, method) =>
        void (t === tenant && method !== "settle" && sessionCall(method) && calls.push(method)),
    });
    try {
      const first = await send(session, alice, "one", "same", 5);
      expect(first.status, await first.clone().text()).toBe(201);
      expect(await json(first)).toMatchObject({ status: "done", duplicate: false });
      expect(calls).toContain("admitInput");
      calls.length = 0;
      for (const wait of [undefined, 5]) {
        const retried = await send(session, alice, "one", "same", wait);
        expect(retried.status).toBe(200);
        expect(await json(retried)).toMatchObject({ status: "done", duplicate: true, outputText: "one" });
      }
      expect(calls).toEqual([]);
      // A new key is admitted and counted as before; a reused key with another body is still refused.
      expect((await send(session, alice, "two", "other")).status).toBe(201);
      expect(calls).toContain("admitInput");
      expect((await send(session, alice, "not one", "same")).status).toBe(422);
      expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([2]);
    } finally {
      setHostSeams({});
    }
  });

  it("A failed read of the tenant's limits keeps the copy the isolate has: inputs are still admitted by it", async () => {
    const tenant = uniqueTenant("limits-read");
    await setLimits(tenant, { user: { inputsPerDay: 2 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const reports: unknown[] = [];
    // Every admission reads the limits again, and every read fails.
    setHostSeams({
      limitsTtlMs: 0,
      limitsCall: (t, method) => {
        if (t === tenant && method === "limits") throw new Error("the tenant's limits are unreachable (test)");
      },
      report: (report) => reports.push(report),
    });
    try {
      expect((await send(session, alice, "one", "a")).status).toBe(201);
      expect((await send(session, alice, "two", "b")).status).toBe(201);
      // Still limited by the copy: not "nothing limited".
      const third = await send(session, alice, "three", "c");
      expect(third.status).toBe(429);
      expect(await json(third)).toMatchObject({ field: "user.inputsPerDay" });
      expect(reports.map((r) => String((r as { report?: unknown }).report))).toContain(
        "Error: the tenant's limits are unreachable (test)",
      );
    } finally {
      setHostSeams({});
    }
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([2]);
  });

  it("An accepted input stays counted when its request fails", async () => {
    const tenant = uniqueTenant("failed");
    await setLimits(tenant, { user: { inputsPerDay: 1 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice, {
      template: await putUserTemplate(tenant, "slow", { model: "echo-slow" }),
    });
    // The request waits for the turn; the session accepts the input, then its object restarts mid-wait.
    const waiting = send(session, alice, "an input the paced echo model takes a while to stream back", "kept", 30);
    await until(
      async () =>
        (await call("GET", `/v1/sessions/${session}/acceptances/kept`, { token: alice })).status === 200
          ? true
          : undefined,
      "the input to be accepted",
      600,
    );
    await killSession(tenant, session);
    const failed = await waiting;
    expect(failed.status, await failed.clone().text()).not.toBe(201);
    // The session accepted it, so it stays counted: the day's one input is used.
    expect((await usage(tenant, `/v1/usage?sub=alice`)).items.map((d) => d.inputs)).toEqual([1]);
    const next = await send(session, alice, "another", "next");
    expect(next.status).toBe(429);
    expect(await json(next)).toMatchObject({ code: "rate_limited", field: "user.inputsPerDay" });
    // A retry of the accepted request still answers its acceptance.
    expect(
      (await send(session, alice, "an input the paced echo model takes a while to stream back", "kept")).status,
    ).toBe(200);
  }, 30_000);

  it("tokensPerDay settles from model usage", async () => {
    const tenant = uniqueTenant("tokens");
    await setLimits(tenant, { user: { tokensPerDay: 5 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    // Nothing used yet: admitted. The echo model reports usage for its answer.
    const first = await send(
      session,
      alice,
      "a sentence long enough to cost more than five tokens in and out",
      undefined,
      10,
    );
    expect(first.status).toBe(201);
    expect(await json(first)).toMatchObject({ status: "done" });
    const settled = await until(async () => {
      const days = (await usage(tenant, "/v1/me/usage", alice)).items;
      return days[0] !== undefined && days[0].totalTokens > 0 ? days[0] : undefined;
    }, "the turn's usage to settle");
    expect(settled.inputTokens + settled.outputTokens).toBe(settled.totalTokens);
    expect(settled.totalTokens).toBeGreaterThan(5);
    const refused = await send(session, alice, "more");
    expect(refused.status).toBe(429);
    expect(await json(refused)).toMatchObject({ code: "rate_limited", field: "user.tokensPerDay" });
  });

  it("A failed usage report is retried until acknowledged", async () => {
    const tenant = uniqueTenant("report");
    await setLimits(tenant, { user: { tokensPerDay: 5 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    let failing = true;
    const restore = await failReports(tenant, () => failing);
    try {
      const first = await send(
        session,
        alice,
        "a sentence long enough to cost more than five tokens in and out",
        undefined,
        10,
      );
      expect(await json(first)).toMatchObject({ status: "done" });
      // The report failed: nothing is metered yet.
      expect((await usage(tenant, "/v1/me/usage", alice)).items.every((d) => d.totalTokens === 0)).toBe(true);
      failing = false;
      // The session's alarm resends what was not acknowledged.
      const settled = await until(async () => {
        await runDurableObjectAlarm(sessionObject(tenant, session));
        const days = (await usage(tenant, "/v1/me/usage", alice)).items;
        return days[0] !== undefined && days[0].totalTokens > 0 ? days[0] : undefined;
      }, "the failed report to be resent");
      expect(settled.totalTokens).toBeGreaterThan(5);
      const refused = await send(session, alice, "more");
      expect(refused.status).toBe(429);
      expect(await json(refused)).toMatchObject({ code: "rate_limited", field: "user.tokensPerDay" });
    } finally {
      restore();
    }
  });

  it("Usage reports waiting in a session survive its restart, including ones kept one per key", async () => {
    const tenant = uniqueTenant("kept");
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    // A batch window longer than the test: the turn's report waits in the session's storage.
    setHostSeams({ meterBatchMs: 600_000 });
    try {
      expect((await send(session, alice, "one", undefined, 10)).status).toBe(201);
      // A report kept the way sessions kept them before batching (one KV key each) is waiting too.
      await runInDurableObject(sessionObject(tenant, session), (_instance, state) => {
        state.storage.kv.put("edge.limits.report.0000000000000001", {
          tenant,
          report: {
            session: "an-older-incarnation",
            owner: "alice",
            usage: [
              { key: "an-older-incarnation\n1", model: "echo/echo", input: 3, output: 4, totalTokens: 7, cost: 0 },
            ],
            finished: [],
          },
        });
      });
      expect((await usage(tenant, "/v1/usage?sub=alice")).items).toEqual([]);
      await killSession(tenant, session);
    } finally {
      setHostSeams({});
    }
    // The next open sends both: the turn's input and tokens, and the older report's 7 tokens.
    expect((await call("GET", `/v1/sessions/${session}`, { token: alice })).status).toBe(200);
    const day = await until(
      async () => {
        const read = (await usage(tenant, "/v1/usage?sub=alice")).items[0];
        return read !== undefined && read.inputs === 1 && read.totalTokens > 7 ? read : undefined;
      },
      "the waiting reports to be sent",
      500,
    );
    // The session's own totals: what its turns recorded.
    const recorded = async (): Promise<number> =>
      (
        await json<{ totals?: { totalTokens: number } }>(
          await call("GET", `/v1/sessions/${session}/usage`, { token: await token(tenant, "operator") }),
        )
      ).totals?.totalTokens ?? -1;
    expect(day.totalTokens).toBe(7 + (await recorded()));
    // Sent once: a later turn adds only its own.
    expect((await send(session, alice, "two", undefined, 10)).status).toBe(201);
    const after = await until(
      async () => {
        const read = (await usage(tenant, "/v1/usage?sub=alice")).items[0];
        return read?.inputs === 2 ? read : undefined;
      },
      "the second turn to be metered",
      500,
    );
    expect(after.totalTokens).toBe(7 + (await recorded()));
  });

  it("Batched usage reports write the alarm once, not per batch", async () => {
    const tenant = uniqueTenant("alarm");
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const stats = (): Promise<AlarmStats> =>
      runInDurableObject(sessionObject(tenant, session), (instance: SessionObject) => ({ ...instance.alarmStats }));
    // A short batch window: every turn's report is sent on its own batch.
    setHostSeams({ meterBatchMs: 1 });
    try {
      expect((await send(session, alice, "turn 0", undefined, 10)).status).toBe(201);
      await until(
        async () => ((await usage(tenant, "/v1/usage?sub=alice")).items[0]?.inputs === 1 ? true : undefined),
        "turn 0 metered",
      );
      const before = await stats();
      for (let i = 1; i <= 5; i++) {
        expect((await send(session, alice, `turn ${i}`, undefined, 10)).status).toBe(201);
        await until(
          async () => ((await usage(tenant, "/v1/usage?sub=alice")).items[0]?.inputs === i + 1 ? true : undefined),
          `turn ${i} metered`,
        );
      }
      const after = await stats();
      // Five batches sent. A turn writes the alarm twice itself (its heartbeat while it runs, set then cleared); the
      // batches' backstop was armed when the first waited and left armed since: no write of its own per batch.
      expect(after.sets + after.clears - (before.sets + before.clears)).toBeLessThanOrEqual(2 * 5);
    } finally {
      setHostSeams({});
    }
  });

  it("A session that reported all its usage is not woken by the usage backstop", async () => {
    const tenant = uniqueTenant("backstop");
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const object = sessionObject(tenant, session);
    const pending = (): Promise<number> =>
      runInDurableObject(
        object,
        (_: SessionObject, state) => [...state.storage.kv.list({ prefix: "edge.limits." })].length,
      );
    setHostSeams({ meterBatchMs: 1 });
    try {
      const before = await runInDurableObject(object, (instance: SessionObject) => ({ ...instance.alarmStats }));
      expect((await send(session, alice, "one turn", undefined, 10)).status).toBe(201);
      await until(async () => ((await pending()) === 0 ? true : undefined), "the turn's report acknowledged");
      const after = await runInDurableObject(object, (instance: SessionObject) => ({ ...instance.alarmStats }));
      // No backstop is a reason to wake any more, and no alarm was written for one: the turn wrote the alarm twice,
      // its heartbeat (the accept's guard) and what is left at its end (the directory's activity update).
      expect(after.usageBackstop).toBe(false);
      expect(after.sets + after.clears - (before.sets + before.clears)).toBeLessThanOrEqual(2);
    } finally {
      setHostSeams({});
    }
  });

  it("Collapse and fork are admitted and counted by limits", async () => {
    const tenant = uniqueTenant("work");
    // Enough turns that a collapse has something to collapse, and exactly the day's inputs.
    const turns = 11;
    await setLimits(tenant, { user: { inputsPerDay: turns } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const root = `/v1/sessions/${session}/conversations/root`;
    for (let i = 0; i < turns; i++)
      expect(
        await json(await send(session, alice, `turn ${i} long enough to cost some tokens`, undefined, 10)),
      ).toMatchObject({ status: "done" });
    await until(async () => {
      const days = (await usage(tenant, "/v1/me/usage", alice)).items;
      return days[0] !== undefined && days[0].totalTokens > 5 ? true : undefined;
    }, "the turns' usage to settle");
    expect((await send(session, alice, "one more")).status).toBe(429);
    // At the day's inputs, a collapse is still admitted: it counts toward no input.
    expect((await call("POST", `${root}/collapse`, { token: alice, body: {} })).status).toBe(202);
    // Over tokensPerDay, a collapse (a model call) is refused like an input, and so is a continue.
    await setLimits(tenant, { user: { tokensPerDay: 5 } });
    const collapse = await call("POST", `${root}/collapse`, { token: alice, body: {} });
    expect(collapse.status).toBe(429);
    expect(await json(collapse)).toMatchObject({ code: "rate_limited", field: "user.tokensPerDay" });
    const resumed = await call("POST", `${root}/continue`, { token: alice, body: {} });
    expect(resumed.status).toBe(429);
    expect(await json(resumed)).toMatchObject({ code: "rate_limited", field: "user.tokensPerDay" });
    // A fork makes no model call: tokensPerDay does not refuse it (requestsPerMinute counts it, as every request).
    expect((await call("POST", `${root}/fork`, { token: alice, body: { at: "start" } })).status).toBe(201);
    expect((await usage(tenant, "/v1/usage?sub=alice")).items.map((d) => d.inputs)).toEqual([turns]);
  }, 60_000);

  it("Continue, signed webhooks, inbound deliveries and send_message are admitted and counted as inputs", async () => {
    const tenant = uniqueTenant("inputs");
    await setLimits(tenant, { user: { inputsPerDay: 1 }, tenant: { inputsPerDay: 4 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const root = `/v1/sessions/${session}/conversations/root`;
    // A continue the session refuses (nothing waits) gives its reservation back: nothing is counted.
    const nothing = await call("POST", `${root}/continue`, { token: alice, body: {} });
    expect(nothing.status).toBe(409);
    const counted = (await usage(tenant, "/v1/usage?sub=alice")).items;
    expect(counted.reduce((sum, day) => sum + day.inputs, 0)).toBe(0);
    // The session MCP server's send_message posts an input: counted, then refused over the user's day.
    const mcp = new Client(
      { name: "limits-test", version: "1" },
      { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${BASE}/v1/sessions/${session}/mcp`), {
        fetch: (url, init) => SELF.fetch(new Request(url, init)),
        requestInit: { headers: { authorization: `Bearer ${alice}` } },
      }),
    );
    const sent = await mcp.callTool({ name: "send_message", arguments: { input: "via MCP", wait_seconds: 10 } });
    expect(sent.isError).not.toBe(true);
    const over = await mcp.callTool({ name: "send_message", arguments: { input: "one too many" } });
    expect(over.isError).toBe(true);
    expect(JSON.stringify(over.content)).toContain("user.inputsPerDay");
    await mcp.close();
    // A continue is an input: over the user's day it is refused before the session is asked.
    const resumed = await call("POST", `${root}/continue`, { token: alice, body: {} });
    expect(resumed.status).toBe(429);
    expect(await json(resumed)).toMatchObject({ code: "rate_limited", field: "user.inputsPerDay" });
    expect((await usage(tenant, "/v1/usage?sub=alice")).items.map((d) => d.inputs)).toEqual([1]);

    // Signed deliveries carry no user: they count for the tenant (its day has 3 inputs left).
    const operator = await token(tenant, "operator");
    const hooks = uniqueSession("lim-hooks");
    expect((await call("PUT", `/v1/sessions/${hooks}`, { token: operator, body: {} })).status).toBe(201);
    const endpoint = await call("PUT", `/v1/sessions/${hooks}/inbound/ci`, {
      token: operator,
      body: { format: "standard" },
    });
    expect(endpoint.status).toBe(201);
    const { secret } = await json<{ secret: string }>(endpoint);
    const inbound = (id: string): Promise<Response> => {
      const body = JSON.stringify({ build: id });
      const seconds = Math.floor(Date.now() / 1000);
      return call("POST", `/v1/inbound/${tenant}/${hooks}/ci`, {
        rawBody: body,
        headers: {
          "content-type": "application/json",
          "webhook-id": id,
          "webhook-timestamp": String(seconds),
          "webhook-signature": new Webhook(secret).sign(id, new Date(seconds * 1000), body),
        },
      });
    };
    const webhook = async (id: string): Promise<Response> => {
      const body = JSON.stringify({ input: `webhook ${id}` });
      const seconds = Math.floor(Date.now() / 1000);
      const signature = await signWebhook(
        await webhookSecret((env as unknown as Env).WEBHOOK_MASTER_SECRET ?? "", tenant, hooks),
        id,
        seconds,
        body,
      );
      return call("POST", `/v1/webhooks/${tenant}/${hooks}/root`, {
        rawBody: body,
        headers: {
          "content-type": "application/json",
          "webhook-id": id,
          "webhook-timestamp": String(seconds),
          "webhook-signature": signature,
        },
      });
    };
    expect((await inbound("msg_in_1")).status).toBe(200);
    expect((await webhook("msg_wh_1")).status).toBe(202);
    expect((await webhook("msg_wh_2")).status).toBe(202);
    const seq = await lastSeq(tenant, hooks);
    // The tenant's day is used up: a new delivery of either kind is 429 with Retry-After (its sender retries) and
    // writes nothing; a redelivery of an accepted one is still answered as the duplicate it is.
    for (const refused of [await inbound("msg_in_2"), await webhook("msg_wh_3")]) {
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await json(refused)).toMatchObject({ code: "rate_limited", field: "tenant.inputsPerDay" });
    }
    expect(await lastSeq(tenant, hooks)).toBe(seq);
    expect(await json(await inbound("msg_in_1"))).toMatchObject({ duplicate: true });
    expect(await json(await webhook("msg_wh_1"))).toMatchObject({ duplicate: true });
    // The tenant's totals are its shards' forwarded counts (at most a few seconds behind them).
    await until(
      async () => {
        const days = (await usage(tenant, "/v1/usage")).items;
        return days.find((d) => d.sub === null)?.inputs === 4 ? days : undefined;
      },
      "the shards' counts to reach the tenant's totals",
      1_000,
    );
  }, 60_000);

  it("concurrentTurns holds a slot while a turn runs and releases it when the turn ends", async () => {
    const tenant = uniqueTenant("turns");
    await setLimits(tenant, { user: { concurrentTurns: 1 } });
    const alice = await userToken(tenant, "alice");
    const slow = await createSession(tenant, alice, {
      template: await putUserTemplate(tenant, "slow", { model: "echo-slow" }),
    });
    const other = await createSession(tenant, alice);
    expect(
      (await send(slow, alice, "a first input that the paced echo model takes a while to stream back")).status,
    ).toBe(201);
    const refused = await send(other, alice, "meanwhile", "meanwhile");
    expect(refused.status).toBe(429);
    expect(await json(refused)).toMatchObject({ field: "user.concurrentTurns" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Once the slow turn is answered, its slot is released (the session's report, not the lease).
    const accepted = await until(
      async () => {
        const response = await send(other, alice, "meanwhile", "meanwhile");
        return response.status === 201 ? response : undefined;
      },
      "the slot to be released",
      600,
    );
    expect(await json(accepted)).toMatchObject({ duplicate: false });
  }, 30_000);

  it("GET /v1/usage and /v1/me/usage figures", async () => {
    const tenant = uniqueTenant("usage");
    await setLimits(tenant, { tenant: { inputsPerDay: 100 } });
    const alice = await userToken(tenant, "alice");
    const bob = await userToken(tenant, "bob");
    const as = await createSession(tenant, alice);
    const bs = await createSession(tenant, bob);
    for (const text of ["one", "two"]) expect((await send(as, alice, text, undefined, 10)).status).toBe(201);
    expect((await send(bs, bob, "three", undefined, 10)).status).toBe(201);
    // A client token (no user) counts for the tenant only.
    const clientSession = await createSession(tenant, await token(tenant, "client"));
    expect((await send(clientSession, await token(tenant, "client"), "four", undefined, 10)).status).toBe(201);
    const all = await until(
      async () => {
        const page = await usage(tenant, "/v1/usage");
        const users = page.items.filter((d) => d.sub !== null);
        return users.length === 2 &&
          users.every((d) => d.totalTokens > 0) &&
          (page.items.find((d) => d.sub === null)?.totalTokens ?? 0) > users.reduce((n, d) => n + d.totalTokens, 0)
          ? page
          : undefined;
      },
      "every turn's usage to settle",
      1_000,
    );
    expect(all.to).toBe(today());
    const byUser = new Map(all.items.map((d) => [d.sub, d]));
    expect(byUser.get("alice")).toMatchObject({ day: today(), inputs: 2 });
    expect(byUser.get("bob")).toMatchObject({ day: today(), inputs: 1 });
    expect(byUser.get(null)).toMatchObject({ day: today(), inputs: 4 });
    const alicesOwn = await usage(tenant, "/v1/me/usage", alice);
    expect(alicesOwn.items).toEqual([byUser.get("alice")]);
    expect((await usage(tenant, "/v1/usage?sub=bob")).items).toEqual([byUser.get("bob")]);
    expect((await usage(tenant, `/v1/usage?from=2020-01-01&to=2020-01-31`)).items).toEqual([]);
    expect(
      await json(await call("GET", "/v1/usage?from=2026-02-30", { token: await token(tenant, "operator") })),
    ).toMatchObject({ code: "invalid_query", field: "from" });
    expect(
      await json(
        await call("GET", "/v1/usage?from=2026-03-02&to=2026-03-01", { token: await token(tenant, "operator") }),
      ),
    ).toMatchObject({ code: "invalid_query", field: "from" });
    // A token without a user has no usage of its own.
    const anonymous = await call("GET", "/v1/me/usage", { token: await token(tenant, "client") });
    expect(anonymous.status).toBe(403);
  });
});

describe("metering", () => {
  it("Metering runs without limits", async () => {
    const tenant = uniqueTenant("meter");
    // No PUT /v1/limits: nothing is limited, and usage is metered all the same.
    expect(await json(await call("GET", "/v1/limits", { token: await token(tenant, "operator") }))).toEqual({
      user: {},
      tenant: {},
    });
    const alice = await userToken(tenant, "alice");
    const as = await createSession(tenant, alice);
    const client = await token(tenant, "client");
    const cs = await createSession(tenant, client);
    // What the Worker and the sessions ask the tenant's LimitsObject while inputs are served and settled (the test's
    // own GET /v1/usage reads aside).
    const calls: string[] = [];
    setHostSeams({ limitsCall: (t, method) => void (t === tenant && sessionCall(method) && calls.push(method)) });
    try {
      for (const text of ["one", "two"]) expect((await send(as, alice, text, undefined, 10)).status).toBe(201);
      expect((await send(cs, client, "three", undefined, 10)).status).toBe(201);
      const page = await until(
        async () => {
          const read = await usage(tenant, "/v1/usage");
          const total = read.items.find((d) => d.sub === null);
          return total?.inputs === 3 && read.items.find((d) => d.sub === "alice")?.inputs === 2 ? read : undefined;
        },
        "every turn's usage to be metered",
        1_000,
      );
      // Nothing limited: no admission call; the sessions' settle reports are the only calls, batched: a session sends
      // what its turns settled at most once per batch window (limits/meter.ts), so never more calls than inputs, and at
      // least one per session.
      expect(calls.every((method) => method === "settle")).toBe(true);
      expect(calls.length).toBeGreaterThanOrEqual(2);
      expect(calls.length).toBeLessThanOrEqual(3);
      const byUser = new Map(page.items.map((d) => [d.sub, d]));
      const tenantDay = byUser.get(null);
      const aliceDay = byUser.get("alice");
      expect(tenantDay).toMatchObject({ day: today(), inputs: 3 });
      expect(aliceDay).toMatchObject({ day: today(), inputs: 2 });
      expect(aliceDay?.totalTokens).toBeGreaterThan(0);
      expect(tenantDay?.totalTokens).toBeGreaterThan(aliceDay?.totalTokens ?? 0);
      // Tokens and cost per model add up to the day's totals, for the tenant and for the user.
      for (const sub of [null, "alice"]) {
        const models = page.models.filter((m) => m.sub === sub);
        expect(models.length).toBeGreaterThan(0);
        expect(models.every((m) => m.model !== "" && m.model !== "unknown" && m.calls > 0)).toBe(true);
        const day = byUser.get(sub);
        expect(models.reduce((n, m) => n + m.totalTokens, 0)).toBe(day?.totalTokens);
        expect(models.reduce((n, m) => n + m.costUsd, 0)).toBeCloseTo(day?.costUsd ?? -1);
      }
      expect((await usage(tenant, "/v1/me/usage", alice)).models).toEqual(page.models.filter((m) => m.sub === "alice"));
    } finally {
      setHostSeams({});
    }
  });

  it("A deleted session's last turn is metered", async () => {
    const tenant = uniqueTenant("delete-meter");
    const alice = await userToken(tenant, "alice");
    const operator = await token(tenant, "operator");
    // Reports wait in the session (a batch window longer than the test): a delete right after a turn finds them there.
    // While `failing`, every report the session sends is lost before it reaches the shard (reported, not thrown).
    let failing = false;
    setHostSeams({
      meterBatchMs: 600_000,
      report: () => undefined,
      limitsCall: (t, method) => {
        if (t === tenant && method === "settle" && failing) throw new Error("the report was lost (test)");
      },
    });
    try {
      const first = await createSession(tenant, alice);
      expect((await send(first, alice, "the last turn", undefined, 10)).status).toBe(201);
      // The shard does not acknowledge: the delete answers 503 and deletes nothing.
      failing = true;
      const refused = await call("DELETE", `/v1/sessions/${first}`, { token: operator });
      expect(refused.status, await refused.clone().text()).toBe(503);
      expect(await json(refused)).toMatchObject({ code: "metering_unavailable" });
      expect((await call("GET", `/v1/sessions/${first}`, { token: alice })).status).toBe(200);
      // It answers again: the delete hands the report over, then deletes.
      failing = false;
      expect((await call("DELETE", `/v1/sessions/${first}`, { token: operator })).status).toBe(200);
      expect((await call("GET", `/v1/sessions/${first}`, { token: alice })).status).toBe(404);
      // A second session's turn, deleted at once.
      const second = await createSession(tenant, alice);
      expect((await send(second, alice, "another last turn", undefined, 10)).status).toBe(201);
      expect((await call("DELETE", `/v1/sessions/${second}`, { token: operator })).status).toBe(200);
    } finally {
      setHostSeams({});
    }
    // Both turns are metered: their inputs and their tokens.
    const days = (await usage(tenant, "/v1/usage?sub=alice")).items;
    expect(days.map((d) => d.inputs)).toEqual([2]);
    expect(days[0]?.totalTokens).toBeGreaterThan(0);
  });

  it("An input's reservation carries its session's pending usage", async () => {
    const tenant = uniqueTenant("carry");
    await setLimits(tenant, { user: { inputsPerDay: 10 } });
    const alice = await userToken(tenant, "alice");
    const session = await createSession(tenant, alice);
    const calls: string[] = [];
    // A batch window longer than the test: a report is sent only when an admission carries it.
    setHostSeams({
      meterBatchMs: 600_000,
      limitsCall: (t, method) => void (t === tenant && sessionCall(method) && calls.push(method)),
    });
    try {
      expect((await send(session, alice, "one", "k1", 10)).status).toBe(201);
      // The first turn's usage waits in the session: nothing settled it yet.
      expect((await usage(tenant, "/v1/usage?sub=alice")).items.map((d) => d.totalTokens)).toEqual([0]);
      expect((await send(session, alice, "two", "k2", 10)).status).toBe(201);
      // The second input's one call settled the first turn: its tokens are counted, the second's still wait.
      const days = (await usage(tenant, "/v1/usage?sub=alice")).items;
      expect(days.map((d) => d.inputs)).toEqual([2]);
      expect(days[0]?.totalTokens).toBeGreaterThan(0);
      expect(calls).toEqual(["admitInput", "admitInput"]);
    } finally {
      setHostSeams({});
    }
  });
});

/** The lastSeq of a session that was created and never took input: what a refused first input leaves. */
async function lastSeqAfterCreate(tenant: string): Promise<number> {
  const jwt = await token(tenant, "operator");
  const session = uniqueSession("fresh");
  expect((await call("PUT", `/v1/sessions/${session}`, { token: jwt, body: {} })).status).toBe(201);
  return lastSeq(tenant, session);
}
