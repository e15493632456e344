/**
 * The tenant's LimitsObject on its own (docs/users.md "Limits and usage"): a turn slot is a lease, so a
 * reservation whose session never reports (a crash between its commit and the report) stops holding
 * its slot when the lease runs out; a report releases it before that; a settlement counts each usage
 * element once however often it is reported.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { LimitsRpc } from "../../src/worker/limits/object.js";
import { installSeams, resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

let tenants = 0;
function limitsOf(label: string): LimitsRpc {
  tenants += 1;
  return env.LIMITS.get(
    env.LIMITS.idFromName(`limits-object-${label}-${Date.now().toString(36)}-${tenants}`),
  ) as unknown as LimitsRpc;
}

describe("LimitsObject", () => {
  it("a turn slot nobody releases expires with its lease; a report releases it at once", async () => {
    const seams = installSeams();
    const limits = limitsOf("lease");
    await limits.setLimits({ user: { concurrentTurns: 1 } });
    const reserve = (key: string): ReturnType<LimitsRpc["admitInput"]> =>
      limits.admitInput({ key: `s1\n${key}`, session: "s1", sub: "alice", keyed: true, leaseMs: 60_000 });
    expect(await reserve("idem:a")).toEqual({ ok: true, reserved: true, slot: true });
    const refused = await reserve("idem:b");
    expect(refused).toMatchObject({ ok: false, refusal: { field: "user.concurrentTurns", limit: 1 } });
    // The session that took the slot crashed before reporting: the slot is held until the lease ends.
    seams.time.now += 59_000;
    expect(await reserve("idem:b")).toMatchObject({ ok: false });
    seams.time.now += 1_000;
    expect(await reserve("idem:b")).toEqual({ ok: true, reserved: true, slot: true });
    // A report of b's final result releases its slot before its lease ends.
    expect(await reserve("idem:c")).toMatchObject({ ok: false });
    expect(await limits.settle([{ session: "s1", usage: [], finished: [{ requestId: "idem:b" }] }])).toEqual({
      settled: 0,
      released: 1,
    });
    expect(await reserve("idem:c")).toEqual({ ok: true, reserved: true, slot: true });
  });

  it("a usage element reported twice counts once", async () => {
    installSeams();
    const limits = limitsOf("settle");
    await limits.setLimits({ tenant: { tokensPerDay: 1_000 } });
    expect(
      await limits.admitInput({ key: "s1\n~x", session: "s1", sub: "alice", keyed: false, leaseMs: 60_000 }),
    ).toEqual({ ok: true, reserved: true });
    const report = {
      session: "s1",
      usage: [{ key: "s1\n7", input: 10, output: 5, totalTokens: 15, cost: 0.5 }],
      finished: [{}],
    };
    expect(await limits.settle([report])).toEqual({ settled: 1, released: 1 });
    expect(await limits.settle([report])).toEqual({ settled: 0, released: 0 });
    const days = await limits.usage({ from: "1970-01-01", to: "2999-12-31" });
    expect(days.items.map((d) => [d.sub, d.inputs, d.totalTokens, d.costUsd])).toEqual([
      [null, 1, 15, 0.5],
      ["alice", 1, 15, 0.5],
    ]);
  });
});
