/**
 * Activity and the stall (seed 002: "If the agent responds to the nudge (updates its hook activity
 * timestamp or sends mail), the stall is resolved"; docs/rig.md): over HTTP, with the Durable Object's
 * manual clock, two polecats found stalled and nudged keep answering, one by touching its hook, one by
 * mail to the witness. The health report never counts either stalled right after its activity, and the
 * patrols that follow nudge and escalate nothing. The stall threshold is shorter than the touch throttle
 * window here, which is where a touch the throttle swallowed used to leave the agent stalled.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { bind } from "../../src/core/state.js";
import { witnessPatrol } from "../../src/rig/state.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, json, token, uniqueSession, until } from "./http-fixtures.js";
import { harnessOf, installSeams, resetSeams, type ManualClock } from "./session-fixtures.js";

const TENANT = "rigactivity";
const SECOND = 1000;

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

function stubOf(name: string) {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${TENANT}:${name}`));
}

async function advance(name: string, ms: number): Promise<void> {
  await runInDurableObject(stubOf(name), async (instance: SessionObject) => {
    const clock = instance.clock as ManualClock;
    clock.advanceTo(clock.now() + ms);
  });
}

/** How many patrols the witness has committed. */
async function patrols(name: string): Promise<number> {
  return runInDurableObject(stubOf(name), async (instance: SessionObject) => {
    const record = await harnessOf(instance).storage.getValue(bind(witnessPatrol, {}));
    return record?.value.patrols ?? 0;
  });
}

interface Health {
  readonly activeAgents: number;
  readonly stalledAgents: number;
  readonly stalledDetails: readonly { readonly agentId: string; readonly stalledMinutes: number }[];
}

describe("activity and the stall", () => {
  it("Activity clears a stall in health at once", async () => {
    installSeams();
    const name = uniqueSession("activity");
    const mayor = await token(TENANT, "mayor");
    const alpha = await token(TENANT, "agent", { agent: "polecat-alpha", sessions: [name] });
    const bravo = await token(TENANT, "agent", { agent: "polecat-bravo", sessions: [name] });
    const path = (rest: string): string => `/v1/sessions/${name}/rig${rest}`;
    expect((await call("PUT", `/v1/sessions/${name}`, { token: mayor, body: { model: "echo" } })).status).toBe(201);
    // A stall after 10 s without activity, a patrol a minute; touches are throttled to one per 30 s.
    const settings = await call("PATCH", path("/witness"), {
      token: mayor,
      body: { stallThresholdMs: 10 * SECOND, patrolIntervalMs: 60 * SECOND },
    });
    expect(await json(settings)).toMatchObject({ stallThresholdMs: 10_000, touchThrottleMs: 30_000 });
    for (const [agent, bearer] of [
      ["polecat-alpha", alpha],
      ["polecat-bravo", bravo],
    ] as const) {
      expect((await call("PUT", path(`/agents/${agent}`), { token: mayor, body: { role: "polecat" } })).status).toBe(
        201,
      );
      const set = await call("PUT", path(`/agents/${agent}/hook`), {
        token: mayor,
        body: { bead_id: `gt-${agent}`, title: "work" },
      });
      expect(set.status).toBe(200);
      expect((await call("POST", path("/hook/activate"), { token: bearer, body: { attempt: 1 } })).status).toBe(200);
    }
    const health = async (): Promise<Health> => json<Health>(await call("GET", path("/health"), { token: mayor }));
    const nudges = async (agent: string): Promise<number> =>
      (await json<{ nudges?: { count: number } }>(await call("GET", path(`/agents/${agent}/hook`), { token: mayor })))
        .nudges?.count ?? 0;
    const stallMail = async (): Promise<string[]> =>
      (await json<{ messages: { payload: unknown }[] }>(await call("GET", path("/mail"), { token: mayor }))).messages
        .map((m) => m.payload)
        .filter((p): p is string => typeof p === "string" && p.startsWith("STALL_"));

    // The first patrol (a minute in) finds both stalled and nudges each once.
    await advance(name, 61 * SECOND);
    await until(async () => ((await nudges("polecat-bravo")) === 1 ? true : undefined), "the first nudges");
    expect(await nudges("polecat-alpha")).toBe(1);
    expect((await health()).stalledAgents).toBe(2);

    // Both answer, and keep working: alpha touches its hook, bravo mails the witness, every 4 s for two
    // minutes (two more patrols). Right after each answer, neither is stalled.
    for (let i = 0; i < 30; i += 1) {
      const touched = await call("POST", path("/hook/touch"), { token: alpha, body: { attempt: 1 } });
      expect(touched.status).toBe(200);
      const mailed = await call("POST", path("/mail"), { token: bravo, body: { to: "witness", payload: "on it" } });
      expect(mailed.status).toBe(201);
      expect(await health()).toMatchObject({ activeAgents: 2, stalledAgents: 0, stalledDetails: [] });
      await advance(name, 4 * SECOND);
    }
    await until(async () => ((await patrols(name)) >= 3 ? true : undefined), "the patrols after the answers");
    // The patrols within the stall threshold of each answer nudged and escalated nothing.
    expect(await nudges("polecat-alpha")).toBe(0);
    expect(await nudges("polecat-bravo")).toBe(0);
    expect(await stallMail()).toEqual([]);
  });
});
