/**
 * The rig at scale: agents are rows (one per agent, enumerated by a keyed scan; no index value rewritten
 * on every register or terminate), an old rig's one-value index is still read through its rows and
 * dropped, and GUPP's wake-up is O(changed): a commit that ends nothing a pending hook waits for tries
 * no pending hook.
 */
import { afterEach, describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, type CommittedBatch } from "../../src/core/harness.js";
import { bind } from "../../src/core/state.js";
import { erase } from "../../src/core/task-kind.js";
import { createWitnessKind, Gupp, Rig, type Actor } from "../../src/rig/index.js";
import { legacyAgentIndex } from "../../src/rig/state.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { flush } from "../core/driver-fixtures.js";

const call = BACKGROUND_CONTEXT;
const mayor: Actor = { role: "mayor" };
const open: Harness[] = [];

afterEach(async () => {
  for (const h of open.splice(0)) await h.close(call).catch(() => undefined);
});

async function fixture() {
  const storage = new MemoryStorage();
  let rig: Rig | undefined;
  const witness = createWitnessKind(() => rig);
  const harness = await Harness.open(storage, { taskKinds: [erase(witness)] }, call);
  open.push(harness);
  rig = new Rig(harness, { witness, name: "scale" });
  const commits: CommittedBatch[] = [];
  harness.onCommit((commit) => commits.push(commit));
  return { harness, rig, commits, storage, witness };
}

function namespaces(commit: CommittedBatch): string[] {
  return commit.batch.kind === "main"
    ? commit.batch.writes.flatMap((w) => ("addr" in w ? [`${w.type} ${w.addr.namespace}`] : []))
    : [];
}

describe("Agents are rows", () => {
  it("a register writes no index value: the 50th register writes what the 2nd did, and the agents are listed by a scan", async () => {
    const f = await fixture();
    await f.rig.register(mayor, "polecat-0", { role: "polecat" });
    const sizes: number[] = [];
    for (let i = 1; i < 50; i++) {
      const before = f.commits.length;
      await f.rig.register(mayor, `polecat-${i}`, { role: "polecat" });
      const written = f.commits.slice(before).flatMap(namespaces);
      expect(written.filter((w) => w.endsWith(" rig.agents"))).toEqual([]);
      sizes.push(written.length);
    }
    expect(new Set(sizes).size).toBe(1);
    await f.rig.terminate(mayor, "polecat-7");
    expect(f.commits.flatMap(namespaces).filter((w) => w.endsWith(" rig.agents"))).toEqual([]);
    const agents = await f.rig.agents();
    expect(agents.map((a) => a.agent.agent_id)).toEqual(Array.from({ length: 50 }, (_, i) => `polecat-${i}`).sort());
    const health = await f.rig.health();
    expect(health).toMatchObject({ totalAgents: 50, idleAgents: 49, terminatedAgents: 1 });
    // The witness ends with the last agent (a scan of at most two rows says whether another remains).
    for (let i = 0; i < 50; i++) if (i !== 7) await f.rig.deregister(mayor, `polecat-${i}`);
    await f.rig.transition(mayor, "polecat-7", "clear").catch(() => undefined);
    await f.rig.deregister(mayor, "polecat-7");
    expect(await f.rig.agents()).toEqual([]);
  });

  it("an old rig's one-value agent index is read through its rows and dropped at the next agent commit", async () => {
    const first = await fixture();
    await first.rig.register(mayor, "polecat-alpha", { role: "polecat" });
    await first.rig.register(mayor, "polecat-bravo", { role: "polecat", conversation: "new" });
    // What the old code left: the index value beside the rows.
    const bravo = (await first.rig.agent("polecat-bravo")).conversationId;
    await first.harness.commit(
      (tx) =>
        tx.value(legacyAgentIndex).set({
          "polecat-alpha": { role: "polecat" },
          "polecat-bravo": { role: "polecat", ...(bravo === undefined ? {} : { conversationId: bravo }) },
        }),
      call,
    );
    // The object opened again: a new Rig over the same state.
    const f = { ...first, rig: new Rig(first.harness, { witness: first.witness, name: "scale" }) };
    expect((await f.rig.agents()).map((a) => a.agent.agent_id)).toEqual(["polecat-alpha", "polecat-bravo"]);
    expect((await f.rig.health()).totalAgents).toBe(2);
    await f.rig.register(mayor, "polecat-charlie", { role: "polecat" });
    expect(f.commits.flatMap(namespaces)).toContain("value.delete rig.agents");
    expect(await f.harness.storage.getValue(bind(legacyAgentIndex, {}))).toBeUndefined();
    expect((await f.rig.health()).totalAgents).toBe(3);
    // Checked once: the next register reads and writes no index.
    const before = f.commits.length;
    await f.rig.register(mayor, "polecat-delta", { role: "polecat" });
    expect(
      f.commits
        .slice(before)
        .flatMap(namespaces)
        .filter((w) => w.endsWith(" rig.agents")),
    ).toEqual([]);
  });
});

describe("GUPP's wake-up is O(changed)", () => {
  it("commits that end nothing a pending hook waits for try no pending hook", async () => {
    const f = await fixture();
    // Without an accept, a conversation agent's hook stays pending (nothing places its work).
    const gupp = new Gupp(f.rig);
    await gupp.open();
    for (let i = 0; i < 20; i++) {
      await f.rig.register(mayor, `polecat-${i}`, { role: "polecat", conversation: "new" });
      await f.rig.transition(mayor, `polecat-${i}`, "set", { work: { bead_id: `gt-${i}`, title: "work" } });
    }
    await flush(f.harness, 10);
    let tries = 0;
    const activate = f.rig.guppActivate.bind(f.rig);
    f.rig.guppActivate = async (agentId: string) => {
      tries += 1;
      return activate(agentId);
    };
    for (let i = 0; i < 10; i++) await f.rig.send(mayor, "witness", `note ${i}`);
    await flush(f.harness, 10);
    expect(tries).toBe(0);
    // A new pending hook is tried once, not every pending hook again.
    await f.rig.register(mayor, "polecat-20", { role: "polecat", conversation: "new" });
    await f.rig.transition(mayor, "polecat-20", "set", { work: { bead_id: "gt-20", title: "work" } });
    await flush(f.harness, 10);
    expect(tries).toBe(1);
  });
});
