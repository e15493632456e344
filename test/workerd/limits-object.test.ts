/**
 * The tenant's LimitsObject on its own (docs/users.md "Limits and usage"): a turn slot is a lease, so a
 * reservation whose session never reports (a crash between its commit and the report) stops holding
 * its slot when the lease runs out; a report releases it before that; a settlement counts each usage
 * element once however often it is reported.
 */
import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { LimitsRpc } from "../../src/worker/limits/object.js";
import { KeptShardStubs, shardOf, shardStub, type ShardRef } from "../../src/worker/limits/shards.js";
import type { Env } from "../../src/worker/env.js";
import { installSeams, resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

let tenants = 0;
/** A new tenant's own object, and the shard of its user `sub` (alice unless named). */
function limitsOf(label: string, sub = "alice"): { tenant: LimitsRpc; shard: LimitsRpc; at: ShardRef; name: string } {
  tenants += 1;
  const name = `limits-object-${label}-${Date.now().toString(36)}-${tenants}`;
  const at = shardOf(name, sub, undefined);
  return {
    tenant: env.LIMITS.get(env.LIMITS.idFromName(name)) as unknown as LimitsRpc,
    shard: shardStub(env as unknown as Env, at),
    at,
    name,
  };
}

describe("LimitsObject", () => {
  it("a turn slot nobody releases expires with its lease; a report releases it at once", async () => {
    const seams = installSeams();
    const { tenant, shard, at } = limitsOf("lease");
    const limits = await tenant.setLimits({ user: { concurrentTurns: 1 } });
    const reserve = (key: string): ReturnType<LimitsRpc["admitInput"]> =>
      shard.admitInput(at, { key: `s1\n${key}`, session: "s1", sub: "alice", keyed: true, leaseMs: 60_000 }, limits);
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
    expect(await shard.settle([{ session: "s1", usage: [], finished: [{ requestId: "idem:b" }] }], at)).toEqual({
      settled: 0,
      released: 1,
    });
    expect(await reserve("idem:c")).toEqual({ ok: true, reserved: true, slot: true });
  });

  it("a usage element reported twice counts once", async () => {
    installSeams();
    const { tenant, shard, at } = limitsOf("settle");
    const limits = await tenant.setLimits({ tenant: { tokensPerDay: 1_000 } });
    expect(
      await shard.admitInput(at, { key: "s1\n~x", session: "s1", sub: "alice", keyed: false, leaseMs: 60_000 }, limits),
    ).toEqual({ ok: true, reserved: true });
    const report = {
      session: "s1",
      usage: [{ key: "s1\n7", input: 10, output: 5, totalTokens: 15, cost: 0.5 }],
      finished: [{}],
    };
    expect(await shard.settle([report], at)).toEqual({ settled: 1, released: 1 });
    expect(await shard.settle([report], at)).toEqual({ settled: 0, released: 0 });
    // The shard's counts reach the tenant's object when it forwards them.
    await shard.flush();
    const days = await tenant.usage({ from: "1970-01-01", to: "2999-12-31" });
    expect(days.items.map((d) => [d.sub, d.inputs, d.totalTokens, d.costUsd])).toEqual([
      [null, 1, 15, 0.5],
      ["alice", 1, 15, 0.5],
    ]);
  });

  it("one call's reports count each element once, by day and by model, and the same call again counts nothing", async () => {
    installSeams();
    const { tenant, shard, at } = limitsOf("batch");
    await tenant.setLimits({});
    const usage = (seq: number, model: string, totalTokens: number) => ({
      key: `s1\n${seq}`,
      model,
      input: totalTokens - 1,
      output: 1,
      totalTokens,
      cost: totalTokens / 100,
    });
    const reports = [
      { session: "s1", usage: [usage(3, "m1", 10), usage(4, "m2", 20)], finished: [{ key: "s1\n5", requestId: "a" }] },
      // The second report repeats element 4 (a resend riding with newer ones): it counts once.
      { session: "s1", usage: [usage(4, "m2", 20), usage(6, "m1", 30)], finished: [{ key: "s1\n7", requestId: "b" }] },
    ];
    expect(await shard.settle(reports, at)).toEqual({ settled: 3, released: 0 });
    expect(await shard.settle(reports, at)).toEqual({ settled: 0, released: 0 });
    await shard.flush();
    const read = await tenant.usage({ from: "1970-01-01", to: "2999-12-31" });
    expect(read.items.map((d) => [d.sub, d.inputs, d.inputTokens, d.outputTokens, d.totalTokens])).toEqual([
      [null, 2, 57, 3, 60],
    ]);
    expect(read.items[0]?.costUsd).toBeCloseTo(0.6, 10);
    expect(read.models.map((m) => [m.model, m.calls, m.totalTokens])).toEqual([
      ["m1", 2, 40],
      ["m2", 1, 20],
    ]);
  });

  it("a user erased before its shard forwarded still counts in the tenant's totals, and nowhere by name", async () => {
    installSeams();
    const { tenant, shard, at } = limitsOf("erase");
    const limits = await tenant.setLimits({ user: { inputsPerDay: 10 } });
    const usage = [{ key: "s1\n3", input: 4, output: 2, totalTokens: 6, cost: 0.25 }];
    // One input forwarded, then one more and its usage counted but not forwarded when the user is erased.
    expect(
      await shard.admitInput(at, { key: "s1\na", session: "s1", sub: "alice", keyed: true, leaseMs: 60_000 }, limits),
    ).toMatchObject({ ok: true, reserved: true });
    await shard.flush();
    expect(
      await shard.admitInput(at, { key: "s1\nb", session: "s1", sub: "alice", keyed: true, leaseMs: 60_000 }, limits),
    ).toMatchObject({ ok: true, reserved: true });
    expect(await shard.settle([{ session: "s1", usage, finished: [] }], at)).toEqual({ settled: 1, released: 0 });
    expect((await tenant.eraseUser("alice", at.tenant)).rows).toBeGreaterThan(0);
    await shard.flush();
    const read = await tenant.usage({ from: "1970-01-01", to: "2999-12-31" });
    expect(read.items.map((d) => [d.sub, d.inputs, d.totalTokens, d.costUsd])).toEqual([[null, 2, 6, 0.25]]);
    expect(read.models.map((m) => [m.sub, m.calls, m.totalTokens])).toEqual([[null, 1, 6]]);
  });

  it("A tenant-wide quota leased to shards is never exceeded, and units a shard holds idle go back", async () => {
    const seams = installSeams();
    const { tenant, name } = limitsOf("pool");
    const limits = await tenant.setLimits({ tenant: { inputsPerDay: 5 } });
    const shards = new Map(
      ["alice", "bob"].map((sub) => {
        const at = shardOf(name, sub, undefined);
        return [sub, { at, stub: shardStub(env as unknown as Env, at) }] as const;
      }),
    );
    let n = 0;
    const admit = async (sub: string) => {
      const shard = shards.get(sub);
      if (shard === undefined) throw new Error(sub);
      n += 1;
      const key = `s-${sub}\n~${n}`;
      return shard.stub.admitInput(shard.at, { key, session: `s-${sub}`, sub, keyed: false, leaseMs: 0 }, limits);
    };
    // Alice's shard leases 1, then 2 (it holds one unit unused); bob's leases 1, then the last 1 of the five.
    expect((await admit("alice")).ok).toBe(true);
    expect((await admit("alice")).ok).toBe(true);
    expect((await admit("bob")).ok).toBe(true);
    expect((await admit("bob")).ok).toBe(true);
    // Nothing is left to lease: bob is refused while alice holds a unit, so the tenant never passes its five.
    expect(await admit("bob")).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay", limit: 5 } });
    // Alice's shard goes idle: its alarm gives the unit back, and bob's next input takes it; then the day is full.
    seams.time.now += 11_000;
    await runDurableObjectAlarm(shards.get("alice")?.stub as unknown as DurableObjectStub);
    expect((await admit("bob")).ok).toBe(true);
    expect(await admit("bob")).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay" } });
    expect(await admit("alice")).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay" } });
    for (const shard of shards.values()) await shard.stub.flush();
    const day = new Date(seams.time.now).toISOString().slice(0, 10);
    const days = await tenant.usage({ from: day, to: day });
    expect(days.items.map((d) => [d.sub, d.inputs])).toEqual([
      [null, 5],
      ["alice", 2],
      ["bob", 3],
    ]);
  });
  it("A lease grant lost to a kill comes back to the pool", async () => {
    const seams = installSeams();
    const { tenant, shard, at } = limitsOf("lost-grant");
    const limits = await tenant.setLimits({ tenant: { inputsPerDay: 1 } });
    const day = new Date(seams.time.now).toISOString().slice(0, 10);
    const asks = [{ kind: "inputs" as const, period: day, want: 1, limit: 1 }];
    // The tenant's object grants alice's shard the day's one unit; the shard is killed before it records the grant.
    expect((await tenant.lease(at.key, asks, "call-1")).granted).toEqual([1]);
    // A retry of the call under its key is answered the same, and takes nothing more from the pool.
    expect((await tenant.lease(at.key, asks, "call-1")).granted).toEqual([1]);
    let n = 0;
    const admit = () => {
      n += 1;
      return shard.admitInput(
        at,
        { key: `s-a\n~${n}`, session: "s-a", sub: "alice", keyed: false, leaseMs: 0 },
        limits,
      );
    };
    // The shard holds nothing, and the pool has nothing left: refused.
    expect(await admit()).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay", limit: 1 } });
    // Never acknowledged: 10 s on, the unit is the pool's again, and the shard's next ask gets it.
    seams.time.now += 11_000;
    expect((await admit()).ok).toBe(true);
    expect(await admit()).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay" } });
    // That grant was recorded and acknowledged: it stays the shard's, so the day's one unit is never granted twice.
    seams.time.now += 11_000;
    expect(await admit()).toMatchObject({ ok: false, refusal: { field: "tenant.inputsPerDay" } });
    await shard.flush();
    const days = await tenant.usage({ from: day, to: day });
    expect(days.items.map((d) => [d.sub, d.inputs])).toEqual([
      [null, 1],
      ["alice", 1],
    ]);
  });
});

describe("KeptShardStubs", () => {
  it("An object keeps one stub per shard, and a failed call drops it", async () => {
    const stubs = new KeptShardStubs(env as unknown as Env);
    const shard: ShardRef = { tenant: "kept-stubs", key: "s.1" };
    const seen: LimitsRpc[] = [];
    const use = async (stub: LimitsRpc) => {
      seen.push(stub);
      return await stub.usage({ from: "2026-01-01", to: "2026-01-01" });
    };
    await stubs.call(shard, use);
    await stubs.call(shard, use);
    expect(seen[1]).toBe(seen[0]);
    await expect(
      stubs.call(shard, async (stub) => {
        seen.push(stub);
        throw new Error("the call failed");
      }),
    ).rejects.toThrow("the call failed");
    expect(seen[2]).toBe(seen[0]);
    await stubs.call(shard, use);
    expect(seen[3]).not.toBe(seen[0]);
    await stubs.call({ tenant: "kept-stubs", key: "s.2" }, use);
    expect(seen[4]).not.toBe(seen[3]);
  });
});
