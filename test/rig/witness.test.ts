/**
 * The witness (seed 002 "Witness observer") over a harness with a fake clock: the escalation
 * ladder (nudge seen live, one de-duplicated critical mail, a touch resolves the stall), the write sets
 * of every witness commit, one patrol after downtime, a failed hook read that is never "no work", and
 * the witness's mail: the mayor's `set` and `focus` instructions, a polecat's reply to a nudge.
 */
import { afterEach, describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, type CommittedBatch } from "../../src/core/harness.js";
import { bind } from "../../src/core/state.js";
import { erase } from "../../src/core/task-kind.js";
import { createWitnessKind, Rig, type Actor, type Nudge } from "../../src/rig/index.js";
import { HOOK_NAMESPACE, mailbox, witnessAgent, witnessPatrol, witnessTask } from "../../src/rig/state.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Storage } from "../../src/storage/storage.js";
import { FakeClock, flush } from "../core/driver-fixtures.js";

const call = BACKGROUND_CONTEXT;
const MIN = 60_000;
const mayor: Actor = { role: "mayor" };
const agent = (id: string): Actor => ({ role: "agent", agent: id });

/** A storage whose hook reads can be made to fail. */
function failingHookReads(inner: Storage): { storage: Storage; fail: (on: boolean) => void } {
  let failing = false;
  const storage = new Proxy(inner, {
    get(target, prop) {
      if (prop === "getValue") {
        return (addr: { namespace: string }, at?: number) => {
          if (failing && addr.namespace === HOOK_NAMESPACE) return Promise.reject(new Error("disk I/O error"));
          return target.getValue(addr as never, at);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { storage, fail: (on) => (failing = on) };
}

interface Fixture {
  readonly harness: Harness;
  readonly rig: Rig;
  readonly clock: FakeClock;
  readonly live: { conversationId: number; nudge: Nudge }[];
  readonly commits: CommittedBatch[];
  patrols(): Promise<number>;
  waitPatrols(n: number): Promise<void>;
}

const open: Harness[] = [];

afterEach(async () => {
  for (const h of open.splice(0)) await h.close(call).catch(() => undefined);
});

async function fixture(storage: Storage = new MemoryStorage()): Promise<Fixture> {
  const clock = new FakeClock(Date.parse("2026-03-05T10:00:00Z"));
  let rig: Rig | undefined;
  const witness = createWitnessKind(() => rig);
  const harness = await Harness.open(storage, { taskKinds: [erase(witness)], host: { clock } }, call);
  open.push(harness);
  rig = new Rig(harness, { witness, name: "test-rig" });
  const live: Fixture["live"] = [];
  rig.nudges.setLiveSink((conversationId, nudge) => {
    live.push({ conversationId, nudge });
    return true;
  });
  const commits: CommittedBatch[] = [];
  harness.onCommit((commit) => commits.push(commit));
  await harness.attach(call);
  const patrols = async (): Promise<number> =>
    (await harness.storage.getValue(bind(witnessPatrol, {})))?.value.patrols ?? 0;
  return {
    harness,
    rig,
    clock,
    live,
    commits,
    patrols,
    waitPatrols: async (n) => {
      for (let i = 0; i < 200; i++) {
        if ((await patrols()) >= n) {
          await flush(harness, 2);
          return;
        }
        await flush(harness, 1);
      }
      throw new Error(`timed out waiting for patrol ${n}`);
    },
  };
}

async function stallMail(rig: Rig): Promise<string[]> {
  return (await rig.mail(mayor)).messages
    .map((m) => m.payload)
    .filter((p): p is string => typeof p === "string" && p.startsWith("STALL_"));
}

async function activePolecat(f: Fixture, id: string, bead: string, conversation?: "new"): Promise<void> {
  await f.rig.register(mayor, id, { role: "polecat", ...(conversation === undefined ? {} : { conversation }) });
  await f.rig.transition(mayor, id, "set", { work: { bead_id: bead, title: "work" } });
  await f.rig.transition(agent(id), id, "activate");
}

describe("Witness escalation ladder", () => {
  it("31 min -> nudge seen live by a watcher; two patrols without activity -> one critical mail; ten more -> still one; touch -> resolved, count reset", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-abc12", "new");
    // An external polecat that listens for its nudges (long poll), stalled the same way.
    await activePolecat(f, "polecat-bravo", "gt-def34");
    const bravoNudges = f.rig.nudges.take("polecat-bravo", 60_000);

    f.clock.advance(31 * MIN);
    await f.waitPatrols(1);
    expect(f.live).toHaveLength(1);
    expect(f.live[0]?.nudge).toMatchObject({
      from: "witness",
      to: "polecat-alpha",
      channel: "nudge",
      payload: "HEALTH_CHECK: no activity for 31m on gt-abc12",
      durable: false,
    });
    expect((await bravoNudges).map((n) => n.payload)).toEqual(["HEALTH_CHECK: no activity for 31m on gt-def34"]);
    expect(await stallMail(f.rig)).toEqual([]);

    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect(f.live).toHaveLength(2); // second nudge, still no response
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    expect(await stallMail(f.rig)).toEqual([
      "STALL_CRITICAL: polecat-alpha idle 41m on gt-abc12",
      "STALL_CRITICAL: polecat-bravo idle 41m on gt-def34",
    ]);

    for (let i = 0; i < 10; i++) {
      f.clock.advance(5 * MIN);
      await f.waitPatrols(4 + i);
    }
    expect(await stallMail(f.rig)).toHaveLength(2);
    const health = await f.rig.health();
    expect(health.stalledDetails.find((d) => d.agentId === "polecat-alpha")).toEqual({
      agentId: "polecat-alpha",
      beadId: "gt-abc12",
      stalledMinutes: 91,
      nudgesSent: 2,
    });

    // The agent answers the nudge: the touch writes despite the throttle, and the next patrol resolves the stall.
    const touched = await f.rig.transition(agent("polecat-alpha"), "polecat-alpha", "touch");
    expect(touched.written).toBe(true);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(14);
    expect((await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value).toBeUndefined();
    const after = await f.rig.health();
    expect(after.stalledDetails.map((d) => d.agentId)).toEqual(["polecat-bravo"]);
    expect(after).toMatchObject({
      rigName: "test-rig",
      totalAgents: 2,
      activeAgents: 1,
      stalledAgents: 1,
      idleAgents: 0,
      terminatedAgents: 0,
    });
    expect(await stallMail(f.rig)).toHaveLength(2);
  });
});

describe("Witness never writes agent state", () => {
  it("every witness commit writes only its own task, rig.witness.* records and its own mail", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1", "new");
    await activePolecat(f, "polecat-bravo", "gt-2");
    await f.rig.register(mayor, "polecat-pending", { role: "polecat" });
    await f.rig.transition(mayor, "polecat-pending", "set", { work: { bead_id: "gt-3", title: "never started" } });
    await f.rig.register(mayor, "refinery-f5g6h", { role: "refinery" });
    await activePolecat(f, "polecat-gone", "gt-4");
    await f.rig.terminate(mayor, "polecat-gone");
    // The witness's mail: a mayor's instruction and a polecat's reply.
    await f.rig.send(mayor, "witness", { set: { stallThresholdMs: 20 * MIN } });
    await f.rig.send(mayor, "witness", { focus: "refinery-f5g6h" });
    await f.rig.send(agent("polecat-bravo"), "witness", "still working");
    const taskId = (await f.harness.storage.getValue(bind(witnessTask, {})))?.value;
    expect(taskId).toBeGreaterThan(0);
    for (let i = 1; i <= 20; i++) {
      f.clock.advance(5 * MIN);
      await f.waitPatrols(i);
      if (i === 10) await f.rig.transition(agent("polecat-alpha"), "polecat-alpha", "touch");
    }
    const witnessCommits = f.commits.filter((c) => c.origin?.taskId === taskId);
    expect(witnessCommits.length).toBeGreaterThanOrEqual(20);
    let mails = 0;
    for (const commit of witnessCommits) {
      for (const write of commit.batch.writes) {
        switch (write.type) {
          case "patch":
          case "settle":
            expect(write.id).toBe(taskId);
            break;
          case "value.set":
          case "value.delete":
            expect(write.addr.namespace.startsWith("rig.witness.")).toBe(true);
            break;
          case "list.append":
            expect(write.addr.namespace).toBe("rig.mail");
            expect(write.addr.key).toBe("mayor");
            expect(write.value).toMatchObject({ from: "witness", to: "mayor", channel: "mail", durable: true });
            mails += 1;
            break;
          default:
            throw new Error(`the witness wrote ${write.type}`);
        }
      }
    }
    expect(mails).toBeGreaterThan(0);
    // The terminated agent's hook and the pending one are untouched; the stalled one is still active.
    expect((await f.rig.readHook("polecat-gone")).hook.status).toBe("active");
    expect((await f.rig.readHook("polecat-pending")).hook.status).toBe("pending");
    const health = await f.rig.health();
    expect(health.terminatedAgents).toBe(1);
    expect(health.notStartedAgents.map((a) => a.agentId)).toEqual(["polecat-pending"]);
    // The mayor's instruction reached the witness's settings.
    expect((await f.rig.settings()).stallThresholdMs).toBe(20 * MIN);
  });
});

describe("Patrol after downtime (harness with a fake clock; the Durable Object case is rig-downtime.test.ts)", () => {
  it("an alarm that fires 3 h late runs one patrol, never a backlog, and schedules the next from now", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    f.clock.advance(3 * 60 * MIN);
    await f.waitPatrols(1);
    await flush(f.harness, 10);
    expect(await f.patrols()).toBe(1);
    expect(f.harness.driver.nextWake).toBe(f.clock.now() + 5 * MIN);
    // One stall, classified by its real age: one mail (alert), no flood.
    expect(await stallMail(f.rig)).toEqual(["STALL_ALERT: polecat-alpha idle 180m on gt-1"]);
  });
});

describe("Failed hook read is not empty", () => {
  it("storage that throws on the hook read -> an error, no activation, no report of idle, no patrol writes", async () => {
    const { storage, fail } = failingHookReads(new MemoryStorage());
    const f = await fixture(storage);
    await f.rig.register(mayor, "polecat-alpha", { role: "polecat" });
    await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-1", title: "work" } });
    fail(true);
    await expect(f.rig.readHook("polecat-alpha")).rejects.toThrow("disk I/O error");
    await expect(f.rig.waitHook(agent("polecat-alpha"), "polecat-alpha", 10)).rejects.toThrow("disk I/O error");
    await expect(f.rig.transition(agent("polecat-alpha"), "polecat-alpha", "activate")).rejects.toThrow(
      "disk I/O error",
    );
    await expect(f.rig.health()).rejects.toThrow("disk I/O error");
    const seq = f.harness.storage.lastSeq;
    f.clock.advance(5 * MIN);
    await flush(f.harness, 10);
    expect(f.harness.storage.lastSeq).toBe(seq);
    fail(false);
    expect((await f.rig.readHook("polecat-alpha")).hook.status).toBe("pending");
    // The witness recovers at its next interval.
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
  });
});

describe("The witness receives mail", () => {
  it("the mayor's { set } instruction changes the witness's settings at its next patrol", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
    await f.rig.send(mayor, "witness", { set: { stallThresholdMs: 6 * MIN, patrolIntervalMs: 2 * MIN } });
    // An instruction with a value under the 1,000 ms floor is ignored, field by field.
    await f.rig.send(mayor, "witness", { set: { alertAfterMs: 10 } });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    // 10 min idle is a stall under the mayor's 6 min threshold (the default 30 min would not nudge).
    expect(f.live.map((n) => n.nudge.payload)).toEqual([]); // an external agent nobody listens to: lost
    expect((await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value).toMatchObject({
      bead_id: "gt-1",
      nudges: 1,
    });
    const settings = await f.rig.settings();
    expect(settings).toMatchObject({ stallThresholdMs: 6 * MIN, patrolIntervalMs: 2 * MIN, alertAfterMs: 60 * MIN });
    expect(f.harness.driver.nextWake).toBe(f.clock.now() + 2 * MIN);
  });

  it("the witness trusts the sender's role, not its name: mail from an agent named like the mayor instructs nothing", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    // No agent may carry a reserved name, in the rig's own API either.
    await expect(f.rig.register(mayor, "mayor", { role: "polecat" })).rejects.toMatchObject({
      code: "rig_invalid",
      field: "agent_id",
    });
    await expect(f.rig.send(agent("mayor"), "witness", { set: { stallThresholdMs: 2 * MIN } })).rejects.toMatchObject({
      code: "rig_forbidden",
    });
    await expect(f.rig.mail(agent("mayor"))).rejects.toMatchObject({ code: "rig_forbidden" });
    await expect(f.rig.mail(agent("polecat-alpha"), "mayor")).rejects.toMatchObject({ code: "rig_forbidden" });
    // A message named "mayor" but sent with an agent's role (as a rig before reserved names could hold).
    await f.harness.commit(async (tx) => {
      tx.list(mailbox("witness")).append({
        from: "mayor",
        sender: "agent",
        to: "witness",
        channel: "mail",
        payload: { set: { stallThresholdMs: 2 * MIN } },
        timestamp: new Date(f.clock.now()).toISOString(),
        durable: true,
      });
    }, call);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
    expect(await f.rig.settings()).toMatchObject({ stallThresholdMs: 30 * MIN });
    // The mayor's own instruction still works; so does a message of a rig that recorded no role (by name).
    await f.harness.commit(async (tx) => {
      tx.list(mailbox("witness")).append({
        from: "mayor",
        to: "witness",
        channel: "mail",
        payload: { set: { alertAfterMs: 90 * MIN } },
        timestamp: new Date(f.clock.now()).toISOString(),
        durable: true,
      });
    }, call);
    await f.rig.send(mayor, "witness", { set: { stallThresholdMs: 20 * MIN } });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect(await f.rig.settings()).toMatchObject({ stallThresholdMs: 20 * MIN, alertAfterMs: 90 * MIN });
  });

  it("a mail from another agent or a non-instruction from the mayor changes nothing", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    await f.rig.send(agent("polecat-alpha"), "witness", { set: { stallThresholdMs: 2 * MIN } });
    await f.rig.send(mayor, "witness", "please look at polecat-alpha");
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
    expect(await f.rig.settings()).toMatchObject({ stallThresholdMs: 30 * MIN });
  });

  it("the mayor's { focus } instruction patrols that agent on every patrol regardless of role; { focus: null } ends it", async () => {
    const f = await fixture();
    await f.rig.register(mayor, "refinery-f5g6h", { role: "refinery", conversation: "new" });
    await f.rig.transition(mayor, "refinery-f5g6h", "set", { work: { bead_id: "gt-merge", title: "merge queue" } });
    await f.rig.transition(agent("refinery-f5g6h"), "refinery-f5g6h", "activate");
    f.clock.advance(31 * MIN);
    await f.waitPatrols(1);
    // Not a polecat: not patrolled.
    expect(f.live).toEqual([]);
    expect((await f.rig.health()).stalledAgents).toBe(0);

    await f.rig.send(mayor, "witness", { focus: "refinery-f5g6h" });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect(f.live.map((n) => n.nudge.payload)).toEqual(["HEALTH_CHECK: no activity for 36m on gt-merge"]);
    expect((await f.rig.health()).stalledDetails).toEqual([
      { agentId: "refinery-f5g6h", beadId: "gt-merge", stalledMinutes: 36, nudgesSent: 1 },
    ]);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(4);
    expect(await stallMail(f.rig)).toEqual(["STALL_CRITICAL: refinery-f5g6h idle 46m on gt-merge"]);

    await f.rig.send(mayor, "witness", { focus: null });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(5);
    expect(f.live).toHaveLength(2);
    expect((await f.rig.health()).stalledAgents).toBe(0);
  });

  it("a polecat's reply to a nudge counts as activity: the stall resolves and its count resets", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    await activePolecat(f, "polecat-bravo", "gt-2");
    f.clock.advance(31 * MIN);
    await f.waitPatrols(1);
    expect((await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value).toMatchObject({
      nudges: 1,
    });
    // polecat-alpha answers by mail; polecat-bravo does not.
    f.clock.advance(1 * MIN);
    await f.rig.send(agent("polecat-alpha"), "witness", "still working: long test run");
    f.clock.advance(4 * MIN);
    await f.waitPatrols(2);
    expect((await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value).toBeUndefined();
    expect((await f.harness.storage.getValue(bind(witnessAgent("polecat-bravo"), {})))?.value).toMatchObject({
      nudges: 2,
    });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    expect(await stallMail(f.rig)).toEqual(["STALL_CRITICAL: polecat-bravo idle 41m on gt-2"]);
    // The hook itself is untouched: the reply is the witness's observation, not an agent write.
    expect((await f.rig.readHook("polecat-alpha")).hook.last_activity).toBe("2026-03-05T10:00:00.000Z");
  });
});

describe("A reply is activity", () => {
  it("A mail reply resolves the stall", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    const record = async () => (await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value;
    f.clock.advance(31 * MIN);
    await f.waitPatrols(1);
    expect(await record()).toMatchObject({ nudges: 1 });
    expect((await f.rig.health()).stalledAgents).toBe(1);

    // The agent answers the nudge by mail: the health report counts it at once, before any patrol.
    f.clock.advance(1 * MIN);
    await f.rig.send(agent("polecat-alpha"), "witness", "still working: long test run");
    expect(await f.rig.health()).toMatchObject({ activeAgents: 1, stalledAgents: 0, stalledDetails: [] });

    // The witness records the reply as activity: no nudge, no stall, no escalation for as long as the
    // reply is recent (32 min + 30 min), patrol after patrol.
    for (let n = 2; n <= 7; n++) {
      f.clock.advance(n === 2 ? 4 * MIN : 5 * MIN);
      await f.waitPatrols(n);
      expect(await record(), `patrol ${n}`).toBeUndefined();
      expect(await f.rig.health(), `patrol ${n}`).toMatchObject({ activeAgents: 1, stalledAgents: 0 });
    }
    expect(await stallMail(f.rig)).toEqual([]);
    // 30 min after the reply with nothing since, it is a new stall: one nudge, counted from the reply.
    f.clock.advance(5 * MIN);
    await f.waitPatrols(8);
    expect(await record()).toMatchObject({ nudges: 1 });
    expect((await f.rig.health()).stalledDetails).toEqual([
      { agentId: "polecat-alpha", beadId: "gt-1", stalledMinutes: 34, nudgesSent: 1 },
    ]);
    expect(await stallMail(f.rig)).toEqual([]);
  });
});

describe("A reply is activity for a pending hook", () => {
  it("a mail reply from an agent whose pending hook was chased counts until the spawn grace passes again after it", async () => {
    const f = await fixture();
    await f.rig.register(mayor, "polecat-alpha", { role: "polecat" });
    await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-p1", title: "not started yet" } });
    const record = async () => (await f.harness.storage.getValue(bind(witnessAgent("polecat-alpha"), {})))?.value;
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect(await record()).toMatchObject({ nudges: 1 });
    // It answers: "starting after the checkout"; the report counts it at once.
    f.clock.advance(1 * MIN);
    await f.rig.send(agent("polecat-alpha"), "witness", "starting after the checkout");
    expect(await f.rig.health()).toMatchObject({ activeAgents: 1, stalledAgents: 0 });
    // Patrols within the grace after the reply: no nudge, no escalation (the reply is remembered).
    f.clock.advance(4 * MIN);
    await f.waitPatrols(3);
    expect(await record()).toBeUndefined();
    f.clock.advance(1 * MIN);
    expect(await f.rig.health()).toMatchObject({ activeAgents: 1, stalledAgents: 0 });
    // The grace passes after the reply without a start: chased again from one nudge.
    f.clock.advance(4 * MIN);
    await f.waitPatrols(4);
    expect(await record()).toMatchObject({ nudges: 1 });
    expect(await stallMail(f.rig)).toEqual([]);
  });
});

describe("the witness lives with the rig's agents", () => {
  it("starts with the first registration, ends with the last deregistration; a hook that is not empty blocks deregistering and writes nothing", async () => {
    const f = await fixture();
    const task = async () => (await f.harness.storage.getValue(bind(witnessTask, {})))?.value;
    expect(await task()).toBeUndefined();
    await f.rig.register(mayor, "polecat-alpha", { role: "polecat" });
    await f.rig.register(mayor, "polecat-bravo", { role: "polecat" });
    const first = await task();
    expect(first).toBeGreaterThan(0);
    await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-1", title: "work" } });
    const seq = f.harness.storage.lastSeq;
    await expect(f.rig.deregister(mayor, "polecat-alpha")).rejects.toMatchObject({ code: "agent_conflict" });
    await expect(f.rig.deregister({ role: "operator" }, "polecat-bravo")).rejects.toMatchObject({
      code: "rig_forbidden",
    });
    expect(f.harness.storage.lastSeq).toBe(seq);
    await f.rig.deregister(mayor, "polecat-bravo");
    expect(await task()).toBe(first);
    await f.rig.terminate(mayor, "polecat-alpha");
    await f.rig.transition(mayor, "polecat-alpha", "clear");
    await f.rig.deregister(mayor, "polecat-alpha");
    expect(await task()).toBeUndefined();
    await flush(f.harness, 4);
    expect((await f.harness.storage.getTasks([first as number])).get(first as number)?.role).toBe("terminal");
    // A new first agent starts a new witness.
    await f.rig.register(mayor, "polecat-charlie", { role: "polecat" });
    const second = await task();
    expect(second).toBeGreaterThan(first as number);
  });
});

describe("The ladder as the seed reads", () => {
  it("after downtime a stalled agent is alerted and nudged, nudged again, then escalated critical", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1", "new");
    f.clock.advance(3 * 60 * MIN);
    await f.waitPatrols(1);
    // Over the alert threshold at first sight: the alert mail, and the first nudge with it.
    expect(await stallMail(f.rig)).toEqual(["STALL_ALERT: polecat-alpha idle 180m on gt-1"]);
    expect(f.live.map((l) => l.nudge.payload)).toEqual(["HEALTH_CHECK: no activity for 180m on gt-1"]);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect(f.live).toHaveLength(2);
    expect(await stallMail(f.rig)).toHaveLength(1);
    // Two recorded nudges went unanswered: critical, once; no further nudges.
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(4);
    expect(await stallMail(f.rig)).toEqual([
      "STALL_ALERT: polecat-alpha idle 180m on gt-1",
      "STALL_CRITICAL: polecat-alpha idle 190m on gt-1",
    ]);
    expect(f.live).toHaveLength(2);
  });

  it("a pending hook whose agent never starts is nudged after the spawn grace, then escalated; the four health counts add up", async () => {
    const f = await fixture();
    await f.rig.register(mayor, "polecat-alpha", { role: "polecat" });
    await f.rig.register(mayor, "polecat-bravo", { role: "polecat" });
    await f.rig.register(mayor, "refinery-1", { role: "refinery" });
    await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-p1", title: "never started" } });
    await f.rig.transition(mayor, "refinery-1", "set", { work: { bead_id: "gt-r1", title: "not patrolled" } });
    const nudged = f.rig.nudges.take("polecat-alpha", 60 * MIN);
    // Within the grace (5 min): active, not chased.
    f.clock.advance(5 * MIN);
    await f.waitPatrols(1);
    let health = await f.rig.health();
    expect(health).toMatchObject({
      totalAgents: 3,
      activeAgents: 2,
      stalledAgents: 0,
      idleAgents: 1,
      terminatedAgents: 0,
      pendingAgents: 2,
      notStartedAgents: [],
    });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect((await nudged).map((n) => n.payload)).toEqual(["HEALTH_CHECK: gt-p1 not started after 10m"]);
    health = await f.rig.health();
    expect(health.activeAgents + health.stalledAgents + health.idleAgents + health.terminatedAgents).toBe(
      health.totalAgents,
    );
    expect(health).toMatchObject({
      activeAgents: 1,
      stalledAgents: 1,
      idleAgents: 1,
      notStartedAgents: [{ agentId: "polecat-alpha", beadId: "gt-p1", pendingMinutes: 10 }],
    });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    f.clock.advance(5 * MIN);
    await f.waitPatrols(4);
    expect(await stallMail(f.rig)).toEqual(["STALL_CRITICAL: polecat-alpha has not started gt-p1 after 20m"]);
    // Activating answers it: the next patrol resolves the stall.
    await f.rig.transition(agent("polecat-alpha"), "polecat-alpha", "activate");
    f.clock.advance(5 * MIN);
    await f.waitPatrols(5);
    expect((await f.rig.health()).stalledAgents).toBe(0);
  });

  it("a nudge is recorded per agent and bead and shown on the agent's hook at its next poll", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    expect((await f.rig.hookFor(agent("polecat-alpha"), "polecat-alpha")).nudges).toBeUndefined();
    f.clock.advance(31 * MIN);
    await f.waitPatrols(1);
    const first = f.clock.now();
    expect((await f.rig.hookFor(agent("polecat-alpha"), "polecat-alpha")).nudges).toEqual({
      count: 1,
      lastAt: new Date(first).toISOString(),
    });
    f.clock.advance(5 * MIN);
    await f.waitPatrols(2);
    expect((await f.rig.hookFor(agent("polecat-alpha"), "polecat-alpha")).nudges).toEqual({
      count: 2,
      lastAt: new Date(first + 5 * MIN).toISOString(),
    });
    // The agent answers: the record ends with the stall.
    await f.rig.transition(agent("polecat-alpha"), "polecat-alpha", "touch");
    f.clock.advance(5 * MIN);
    await f.waitPatrols(3);
    expect((await f.rig.hookFor(agent("polecat-alpha"), "polecat-alpha")).nudges).toBeUndefined();
  });

  it("A shorter patrol interval applies at once", async () => {
    const f = await fixture();
    await activePolecat(f, "polecat-alpha", "gt-1");
    const witness = (await f.harness.storage.getValue(bind(witnessTask, {})))?.value as number;
    const planned = async (): Promise<number | undefined> =>
      ((await f.harness.storage.getTasks([witness])).get(witness)?.state as { next_patrol_at?: number } | undefined)
        ?.next_patrol_at;
    const t0 = f.clock.now();
    expect(await planned()).toBe(t0 + 5 * MIN);
    f.clock.advance(MIN);
    await f.rig.patchSettings(mayor, { patrolIntervalMs: MIN });
    // The settings commit ended the witness's sleep; the witness re-planned in its own commit.
    for (let i = 0; i < 50 && (await planned()) !== t0 + 2 * MIN; i++) await flush(f.harness, 1);
    expect(await planned()).toBe(t0 + 2 * MIN);
    expect(f.harness.driver.nextWake).toBe(t0 + 2 * MIN);
    expect(await f.patrols()).toBe(0);
    f.clock.advance(MIN);
    await f.waitPatrols(1);
    expect(f.harness.driver.nextWake).toBe(t0 + 3 * MIN);
    // A longer interval does not postpone the patrol already planned.
    await f.rig.patchSettings(mayor, { patrolIntervalMs: 30 * MIN });
    await flush(f.harness, 5);
    expect(await planned()).toBe(t0 + 3 * MIN);
  });
});
