/**
 * The session host's parts without a harness: the durable kill counters and fault record (HostBook,
 * over a real Durable Object's SQLite) and the alarm plan (pure). The SessionObject tests exercise them
 * together; these pin the rules one by one.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { migrate } from "../../src/storage/migrations.js";
import type { SqlHost } from "../../src/storage/sql.js";
import { AlarmPlan, MIN_ALARM_DELAY_MS } from "../../src/worker/session/alarm-plan.js";
import { HostBook } from "../../src/worker/session/host-book.js";

function inObject<R>(name: string, fn: (host: SqlHost) => R | Promise<R>): Promise<R> {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`host-parts:${name}:${crypto.randomUUID()}`));
  return runInDurableObject(stub, (_instance, state) => {
    const host: SqlHost = state.storage;
    migrate(host);
    return fn(host);
  });
}

describe("HostBook kill counters", () => {
  it("counts consecutive starts without a return and refuses the start after the bound", async () => {
    await inObject("bound", (host) => {
      const book = new HostBook(host, 3);
      expect(book.beforeStart(7, "v1")).toEqual({ type: "start", kills: 1 });
      expect(book.beforeStart(7, "v1")).toEqual({ type: "start", kills: 2 });
      expect(book.beforeStart(7, "v1")).toEqual({ type: "start", kills: 3 });
      expect(book.beforeStart(7, "v1")).toEqual({ type: "quarantined", kills: 3 });
      expect(book.beforeStart(7, "v1")).toEqual({ type: "quarantined", kills: 3 });
      expect(book.quarantined("v1")).toEqual([7]);
      expect(book.kills()).toEqual([{ taskId: 7, kills: 3, version: "v1" }]);
    });
  });

  it("a returned invocation resets the count, so normal cycles never accumulate", async () => {
    await inObject("reset", (host) => {
      const book = new HostBook(host, 3);
      for (let i = 0; i < 10; i += 1) {
        expect(book.beforeStart(7, "v1")).toEqual({ type: "start", kills: 1 });
        book.returned(7);
      }
      expect(book.kills()).toEqual([]);
    });
  });

  it("kills counted under another deployed version do not count", async () => {
    await inObject("version", (host) => {
      const book = new HostBook(host, 3);
      book.beforeStart(7, "v1");
      book.beforeStart(7, "v1");
      book.beforeStart(7, "v1");
      expect(book.quarantined("v1")).toEqual([7]);
      expect(book.quarantined("v2")).toEqual([]);
      expect(book.beforeStart(7, "v2")).toEqual({ type: "start", kills: 1 });
      expect(book.kills()).toEqual([{ taskId: 7, kills: 1, version: "v2" }]);
    });
  });

  it("release gives a quarantined task a fresh count; counts are per task", async () => {
    await inObject("release", (host) => {
      const book = new HostBook(host, 2);
      book.beforeStart(7, "v1");
      book.beforeStart(7, "v1");
      book.beforeStart(8, "v1");
      expect(book.beforeStart(7, "v1").type).toBe("quarantined");
      expect(book.beforeStart(8, "v1")).toEqual({ type: "start", kills: 2 });
      book.release(7);
      expect(book.beforeStart(7, "v1")).toEqual({ type: "start", kills: 1 });
    });
  });
});

describe("HostBook fault record", () => {
  it("records one fault (the latest), reads it back, and clears it once", async () => {
    await inObject("fault", (host) => {
      const book = new HostBook(host, 3);
      expect(book.fault()).toBeUndefined();
      book.recordFault({ taskId: 4, kind: "k", method: "execute", error: new Error("x"), message: "first" }, 100);
      book.recordFault({ message: "second", error: undefined }, 200);
      expect(book.fault()).toEqual({ at: 200, message: "second" });
      expect(book.clearFault()).toBe(true);
      expect(book.fault()).toBeUndefined();
      expect(book.clearFault()).toBe(false);
    });
  });
});

function recordingPlan(): { plan: AlarmPlan; writes: Array<number | "clear"> } {
  const writes: Array<number | "clear"> = [];
  const plan = new AlarmPlan({ set: (at) => writes.push(at), clear: () => writes.push("clear") }, 30_000);
  return { plan, writes };
}

describe("AlarmPlan", () => {
  it("writes nothing until it knows what is scheduled, then only what changed", () => {
    const { plan, writes } = recordingPlan();
    plan.busy(true, 1_000);
    plan.wake(50_000, 1_000);
    expect(writes).toEqual([]);
    plan.known(31_000, 1_000); // the heartbeat already scheduled: nothing to write
    expect(writes).toEqual([]);
    plan.wake(10_000, 2_000);
    plan.wake(10_000, 2_000);
    expect(writes).toEqual([10_000]);
    plan.wake(undefined, 3_000);
    expect(writes).toEqual([10_000, 31_000]);
    plan.busy(false, 4_000);
    expect(writes).toEqual([10_000, 31_000, "clear"]);
    expect(plan.stats).toMatchObject({ sets: 2, clears: 1, changes: 3, armed: undefined });
  });

  it("a fired alarm is consumed: the heartbeat moves about 30 s on while busy, and nothing is re-armed when idle", () => {
    const { plan, writes } = recordingPlan();
    plan.known(undefined, 0);
    plan.busy(true, 0);
    plan.fired(30_000);
    plan.fired(60_000);
    expect(writes).toEqual([30_000, 60_000, 90_000]);
    plan.busy(false, 70_000);
    plan.fired(90_000);
    expect(writes).toEqual([30_000, 60_000, 90_000, "clear"]);
  });

  it("a user watch's expiry is one more reason: the earliest of all reasons is armed, and dropping it re-arms the next", () => {
    const { plan, writes } = recordingPlan();
    plan.known(undefined, 0);
    plan.outbox(50_000, 0);
    plan.watches(20_000, 0);
    expect(writes).toEqual([50_000, 20_000]);
    plan.watches(undefined, 21_000);
    expect(writes).toEqual([50_000, 20_000, 50_000]);
    plan.watches(40_000, 22_000);
    expect(writes).toEqual([50_000, 20_000, 50_000, 40_000]);
    // A deleted session's storage took its alarm along: no reason remains, and nothing is written.
    plan.cleared(23_000);
    expect(plan.desired).toBeUndefined();
    expect(writes).toEqual([50_000, 20_000, 50_000, 40_000]);
  });

  it("the usage backstop behind a turn's report costs no write and no wake once the report is acknowledged", () => {
    const { plan, writes } = recordingPlan();
    plan.known(undefined, 0);
    plan.busy(true, 0); // the turn's heartbeat
    plan.limits(61_000, 1_000); // its answer's report waits for its batch, the backstop a minute on
    expect(writes).toEqual([30_000]);
    plan.busy(false, 1_000); // the heartbeat wakes before the backstop: it stands in for it, nothing written
    expect(writes).toEqual([30_000]);
    plan.limits(undefined, 2_000); // acknowledged: the write the turn's end waited for, without the backstop
    expect(writes).toEqual([30_000, "clear"]);
    expect(plan.stats.armed).toBeUndefined();
  });

  it("an alarm written for the usage backstop alone stays armed when the reports are acknowledged", () => {
    const { plan, writes } = recordingPlan();
    plan.known(undefined, 0);
    plan.limits(60_000, 0); // a report outside a turn: the backstop is the only reason, one write
    plan.limits(undefined, 1_000); // acknowledged: deleting the alarm would be a write, its wake costs less
    expect(writes).toEqual([60_000]);
    plan.limits(62_000, 2_000); // the next report: the armed alarm still wakes before its backstop
    expect(writes).toEqual([60_000]);
    plan.watches(30_000, 3_000); // an earlier reason is written as before
    expect(writes).toEqual([60_000, 30_000]);
    plan.limits(undefined, 4_000);
    plan.watches(undefined, 5_000); // that alarm was not the backstop's: nothing left, cleared
    expect(writes).toEqual([60_000, 30_000, "clear"]);
  });

  it("a wake time already due is set a little ahead instead of in the past, so the handler cannot spin", () => {
    const { plan, writes } = recordingPlan();
    plan.known(undefined, 0);
    plan.wake(5_000, 9_000);
    expect(writes).toEqual([9_000 + MIN_ALARM_DELAY_MS]);
  });
});
