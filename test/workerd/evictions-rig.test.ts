/**
 * Eviction at every commit boundary of a rig (the rig's share of the eviction sweep; docs/rig.md):
 * a small scripted rig in a real session Durable Object, run once uninterrupted and then killed right
 * after each of its commits k (`ctx.abort()` once commit k is durable: `runScenario` of eviction-harness.ts), each
 * time reopened by the alarm alone, finished, and compared with the uninterrupted run. The script: two
 * polecats (a conversation agent and an external one), a hook set on each, GUPP activation of the
 * conversation agent and its completion by the answer, the external agent's activation, and witness
 * patrols through a nudge, a second nudge and a critical escalation.
 *
 * The external agent's hook is set and activated in one step (two commits, no quiesce between), so a
 * kill after the set commit takes the activation with it and only re-submitting the interrupted step
 * restores it; after every kill the session must already be open (the alarm alone reopened it).
 *
 * Checked after the reopen (at quiescence) and at the end: each set hook has attempt 1 and its live
 * bead is held by its agent; every mailbox (mayor, witness, agents) holds each message once; nothing
 * is live but the witness, which has a wake; the conversation agent's hook is completed
 * exactly once and its work item accepted once (one acceptance of `rig:polecat-alpha:{conversation}:1`, one user
 * entry),
 * one critical escalation mail, and the witness's records (patrol count, nudge counts, mail cursor), the
 * hooks and the mayor's mailbox equal the uninterrupted run's. The witness is a live task forever, so
 * quiescence here means: no invocation busy and nothing live but the witness. Exactly k commits are
 * durable at each kill; the kill after commit 5 interrupts the conversation agent's generation, which
 * the reopened object parks in retry_wait with a wake: quiescence moves the clock to it (before the next
 * patrol), and that run's times (hook timestamps, stall minutes) compare as placeholders.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Harness } from "../../src/core/harness.js";
import { requestMessages } from "../../src/core/context.js";
import { requestKey } from "../../src/core/inbox.js";
import { bind, bindTo } from "../../src/core/state.js";
import { guppRequestId, WITNESS_KIND, type Actor, type StoredHook } from "../../src/rig/index.js";
import {
  beadValue,
  scanAgents,
  hookValue,
  mailbox,
  witnessAgent,
  witnessPatrol,
  witnessTask,
} from "../../src/rig/state.js";
import { MAYOR_ID, WITNESS_ID } from "../../src/rig/types.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { runScenario, type Scenario } from "./eviction-harness.js";
import {
  call,
  clockOf,
  harnessOf,
  installSeams,
  ok,
  resetSeams,
  until,
  type Seams,
  type TestSession,
} from "./session-fixtures.js";

const MIN = 60_000;
const mayor: Actor = { role: "mayor" };
const agent = (id: string): Actor => ({ role: "agent", agent: id });

/** The script: each step is idempotent (by what it finds), so the step a kill interrupted is re-run. */
type Step =
  | { readonly type: "register"; readonly agent: string; readonly conversation: boolean }
  | { readonly type: "settings" }
  /** Set a hook; with `activate`, the agent activates it in the same step (two commits, no quiesce between). */
  | { readonly type: "set"; readonly agent: string; readonly bead: string; readonly activate?: true }
  | { readonly type: "activate"; readonly agent: string }
  | { readonly type: "patrol"; readonly n: number };

const STEPS: readonly Step[] = [
  { type: "register", agent: "polecat-alpha", conversation: true },
  { type: "register", agent: "polecat-bravo", conversation: false },
  { type: "settings" },
  // GUPP: the idle conversation agent's hook is activated and its work accepted in the setting commit;
  // the echo model's answer completes it.
  { type: "set", agent: "polecat-alpha", bead: "gt-alpha" },
  // Set and activated in one step: a kill after the set commit takes the activation with it (exactly k
  // durable), so only submitting the interrupted step again activates it.
  { type: "set", agent: "polecat-bravo", bead: "gt-bravo", activate: true },
  // Patrols (one minute apart: the settings step's shorter interval applies at once): two within the
  // stall threshold, then nudge, nudge, critical escalation, and one more that mails nothing new.
  { type: "patrol", n: 1 },
  { type: "patrol", n: 2 },
  { type: "patrol", n: 3 },
  { type: "patrol", n: 4 },
  { type: "patrol", n: 5 },
  { type: "patrol", n: 6 },
];

interface Outcome {
  readonly commits: number;
  readonly state: unknown;
  /** Kills whose interrupted generation was retried after its backoff (the clock moved for it). */
  readonly retried: boolean;
}

/** Set when a quiesce moved the clock to a retry's wake (the hooks' timestamps then differ from the baseline's). */
let retried = false;

/** The state with the times a retry's backoff shifts left out: ISO timestamps and the stall's idle minutes. */
function timeless(state: unknown): unknown {
  return JSON.parse(
    JSON.stringify(state, (_key, value: unknown) =>
      typeof value === "string"
        ? value.replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, "<time>").replace(/idle \d+m/g, "idle <n>m")
        : value,
    ),
  );
}

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

async function hookOf(h: Harness, agentId: string): Promise<StoredHook | undefined> {
  return (await h.storage.getValue(bind(hookValue(agentId), {})))?.value;
}

async function patrolsOf(h: Harness): Promise<number> {
  return (await h.storage.getValue(bind(witnessPatrol, {})))?.value.patrols ?? 0;
}

async function submit(session: TestSession, step: Step): Promise<void> {
  const state = () =>
    runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const hook = step.type === "set" || step.type === "activate" ? await hookOf(h, step.agent) : undefined;
      return { hook, patrols: await patrolsOf(h) };
    });
  switch (step.type) {
    case "register":
      // The same registration again writes nothing.
      await ok(
        session.rpc.op("rigRegister", mayor, step.agent, {
          role: "polecat",
          ...(step.conversation ? { conversation: "new" as const } : {}),
        }),
      );
      return;
    case "settings":
      await ok(session.rpc.op("rigPatchSettings", mayor, { patrolIntervalMs: MIN, stallThresholdMs: 2 * MIN }));
      return;
    case "set":
      if (((await state()).hook?.attempt ?? 0) < 1)
        await ok(
          session.rpc.op("rigTransition", mayor, step.agent, "set", {
            work: { bead_id: step.bead, title: `work on ${step.bead}` },
          }),
        );
      if (step.activate === true && (await state()).hook?.file.status === "pending")
        await ok(session.rpc.op("rigTransition", agent(step.agent), step.agent, "activate", { attempt: 1 }));
      return;
    case "activate":
      if ((await state()).hook?.file.status !== "pending") return;
      await ok(session.rpc.op("rigTransition", agent(step.agent), step.agent, "activate", { attempt: 1 }));
      return;
    case "patrol": {
      if ((await state()).patrols >= step.n) return;
      // Move the shared clock to the witness's wake and wake this instance's sleeper.
      const wake = await runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        const id = (await h.storage.getValue(bind(witnessTask, {})))?.value;
        const task = id === undefined ? undefined : (await h.storage.getTasks([id])).get(id);
        return (task?.state as { next_patrol_at?: number } | undefined)?.next_patrol_at;
      });
      if (wake === undefined) throw new Error("no witness task");
      seams.time.now = Math.max(seams.time.now, wake);
      await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(seams.time.now));
      await until(async () => (await state()).patrols >= step.n, `patrol ${step.n}`);
      return;
    }
    default: {
      const never: never = step;
      throw new Error(`unknown step ${JSON.stringify(never)}`);
    }
  }
}

/**
 * No invocation busy and nothing live but the witness. A sleeper other than the witness (a generation a
 * kill interrupted, parked in retry_wait) is woken by time alone: the clock moves to its wake, which must
 * come before the witness's next patrol (so no patrol runs that the script did not ask for).
 */
async function quiesce(session: TestSession): Promise<void> {
  for (let round = 0; round < 20; round++) {
    await until(async () => {
      if ((await session.rpc.inspect()).busy) return false;
      const others = await runInDurableObject(session.stub, async (instance: SessionObject) => {
        const live = await harnessOf(instance).storage.scanTasks({ live: true, limit: 100 });
        return live.items.filter((task) => task.kind !== WITNESS_KIND);
      });
      return others.length === 0 || others.every((task) => (task.state as { status?: string }).status === "retry_wait");
    }, "nothing live but the witness and sleepers");
    const { others, patrolAt } = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const live = await h.storage.scanTasks({ live: true, limit: 100 });
      const witness = live.items.find((task) => task.kind === WITNESS_KIND);
      return {
        others: live.items
          .filter((task) => task.kind !== WITNESS_KIND)
          .map((task) => (task.state as { notBefore?: number }).notBefore),
        patrolAt: (witness?.state as { next_patrol_at?: number } | undefined)?.next_patrol_at,
      };
    });
    if (others.length === 0) return;
    // Every sleeper has a wake (a live task without one is lost work), before the next patrol.
    const wakes = others.filter((w): w is number => w !== undefined);
    expect(wakes, "every live task but the witness has a wake").toHaveLength(others.length);
    const wake = Math.min(...wakes);
    if (patrolAt !== undefined) expect(wake, "a sleeper wakes before the next patrol").toBeLessThan(patrolAt);
    retried = true;
    seams.time.now = Math.max(seams.time.now, wake);
    await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(seams.time.now));
  }
  throw new Error("the rig never became quiescent (nothing live but the witness)");
}

/** Invariants at any quiescent point, and the state compared with the uninterrupted run. */
async function check(session: TestSession): Promise<unknown> {
  return runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const index: Record<string, { readonly conversationId?: number }> = {};
    for await (const agent of scanAgents(h.storage)) index[agent.agent_id] = agent;
    const hooks: Record<string, unknown> = {};
    const witness: Record<string, unknown> = {};
    for (const id of Object.keys(index).sort()) {
      const hook = await hookOf(h, id);
      hooks[id] = hook === undefined ? undefined : { file: hook.file, attempt: hook.attempt };
      witness[id] = (await h.storage.getValue(bind(witnessAgent(id), {})))?.value;
    }
    // The conversation agent's work item: accepted once (one acceptance, one user entry), answered once.
    const alpha = index["polecat-alpha"]?.conversationId;
    let context: unknown = undefined;
    if (alpha !== undefined) {
      const acceptance = (
        await h.storage.getValue(bindTo(requestKey(guppRequestId("polecat-alpha", alpha, 1)), h.rootId))
      )?.value;
      const handle = await h.conversation(alpha, call);
      const messages = handle === undefined ? [] : requestMessages(await handle.contextEntries(undefined, call));
      const work = messages.filter(
        (m) => m.role === "user" && JSON.stringify(m.content).includes("Work item gt-alpha"),
      );
      expect(work.length).toBe(acceptance === undefined ? 0 : 1);
      if ((await hookOf(h, "polecat-alpha"))?.file.status === "completed") {
        expect(messages.filter((m) => m.role === "assistant")).toHaveLength(1);
      }
      context = messages.map((m) => ({ role: m.role, content: JSON.stringify(m.content) }));
    }
    // Each hook's bead is set once (attempt 1, its bead held by that agent while live) and, for the
    // conversation agent, completed by exactly one answer (above): no attempt lost or repeated.
    for (const id of Object.keys(hooks)) {
      const hook = await hookOf(h, id);
      if (hook === undefined || hook.file.status === "empty") continue;
      expect(hook.attempt, `${id}: hook set once`).toBe(1);
      const bead = hook.file.work_item?.bead_id;
      const holder = bead === undefined ? undefined : (await h.storage.getValue(bind(beadValue(bead), {})))?.value;
      if (hook.file.status === "pending" || hook.file.status === "active")
        expect(holder, `${id}: bead ${bead ?? "-"} held`).toEqual({ agent_id: id, attempt: 1 });
    }
    // Every mailbox (the mayor's, the witness's, each agent's): each message delivered once.
    const boxes: Record<string, unknown[]> = {};
    for (const owner of [MAYOR_ID, WITNESS_ID, ...Object.keys(index).sort()]) {
      const payloads = (await h.storage.readList(bind(mailbox(owner), {}), { limit: 1000 })).items.map((e) =>
        JSON.stringify(e.value),
      );
      expect(new Set(payloads).size, `mailbox ${owner}: each message once`).toBe(payloads.length);
      boxes[owner] = payloads;
    }
    const mail = (await h.storage.readList(bind(mailbox("mayor"), {}), { limit: 1000 })).items.map(
      (e) => e.value.payload,
    );
    // Escalations are de-duplicated per agent, bead and severity.
    const stalls = mail.filter((p) => typeof p === "string" && p.startsWith("STALL_"));
    expect(new Set(stalls).size).toBe(stalls.length);
    // No live task without a wake: nothing live but the witness, which sleeps until its next patrol.
    const live = (await h.storage.scanTasks({ live: true, limit: 100 })).items;
    expect(
      live.map((task) => task.kind),
      "nothing live but the witness",
    ).toEqual(live.length === 0 ? [] : [WITNESS_KIND]);
    // The witness task is live with a wake, and the alarm is armed for it.
    const taskId = (await h.storage.getValue(bind(witnessTask, {})))?.value;
    if (taskId !== undefined) {
      const task = (await h.storage.getTasks([taskId])).get(taskId);
      expect(task?.role).not.toBe("terminal");
      expect(
        (task?.state as { next_patrol_at?: number } | undefined)?.next_patrol_at,
        "the witness has a wake",
      ).toBeTypeOf("number");
      expect(h.driver.nextWake, "the driver's next wake").toBeTypeOf("number");
    }
    const patrol = (await h.storage.getValue(bind(witnessPatrol, {})))?.value;
    return { hooks, witness, patrol, mail, boxes, context };
  });
}

async function run(name: string, start: number, killAt?: number): Promise<Outcome> {
  // Every run starts at the same time, so the hooks' timestamps and the stall minutes are comparable.
  seams.time.now = start;
  retried = false;
  const scenario: Scenario<Step, { readonly state: unknown }> = {
    config: { model: "echo" },
    steps: STEPS,
    // Exactly k commits durable at each kill (the harness's default, stated here: this sweep relies on it).
    exactBoundary: true,
    submit: (session, step) => submit(session, step),
    quiesce: (session) => quiesce(session),
    // The alarm alone reopened the session (no request): the harness is open before anything asks.
    afterReopen: async (session) => {
      const opened = await runInDurableObject(
        session.stub,
        (instance: SessionObject) => instance.harness !== undefined,
      );
      expect(opened, `the alarm reopened the session after the kill at commit ${killAt ?? 0}`).toBe(true);
    },
    checkReopened: async (session) => {
      await check(session);
    },
    checkEnd: async (session) => ({ state: await check(session) }),
  };
  const { commits, state } = await runScenario(scenario, name, killAt);
  return { commits, state, retried };
}

describe("eviction at every commit boundary of a rig", () => {
  it(
    "hook set, GUPP activation and completion, witness nudges and escalation: killed after each commit, reopened by the alarm, ends as the uninterrupted run",
    { timeout: 120_000 },
    async () => {
      const start = seams.time.now;
      const baseline = await run("rig-evict-baseline", start);
      const state = baseline.state as {
        hooks: Record<string, { file: { status: string } }>;
        mail: unknown[];
        witness: Record<string, unknown>;
      };
      // The uninterrupted run did what the script says.
      expect(state.hooks["polecat-alpha"]?.file.status).toBe("completed");
      expect(state.hooks["polecat-bravo"]?.file.status).toBe("active");
      expect(
        state.mail.filter((p) => typeof p === "string" && p.startsWith("STALL_CRITICAL: polecat-bravo")),
      ).toHaveLength(1);
      expect(state.witness["polecat-bravo"]).toMatchObject({ nudges: 2, escalated: ["critical"] });
      const tried: number[] = [];
      const retries: number[] = [];
      for (let k = 1; k <= baseline.commits; k++) {
        const killed = await run(`rig-evict-${k}`, start, k);
        // A kill that interrupted a generation retries it after its backoff: the clock moved, so the
        // times compare as times (everything else exactly); otherwise the whole state compares exactly.
        if (killed.retried)
          expect({ k, state: timeless(killed.state) }).toEqual({ k, state: timeless(baseline.state) });
        else expect({ k, state: killed.state }).toEqual({ k, state: baseline.state });
        tried.push(k);
        if (killed.retried) retries.push(k);
      }
      console.log(
        `rig eviction sweep: ${tried.length} of ${baseline.commits} commit boundaries tried (${tried.join(", ")}); interrupted generation retried after k = ${retries.join(", ") || "none"}`,
      );
    },
  );
});
