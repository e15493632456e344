/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * The rig at 10,000 agents: half with active hooks, a tenth stalled. Prints SQLite rows read and written
 * per register (the first and the last: agents are rows, so the 10,000th costs what the first did), per
 * witness patrol (one commit) with its hold time on the line (the commit's time: nothing else commits
 * meanwhile; workerd's coarse clock), and one health report's rows read. Rows are exact; times are
 * indicative only.
 *
 * Run: npm run bench:rig
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness } from "../../src/core/harness.js";
import type { Clock } from "../../src/core/host.js";
import { erase } from "../../src/core/task-kind.js";
import { createWitnessKind, patrol, Rig, type Actor } from "../../src/rig/index.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";

const call = BACKGROUND_CONTEXT;
const MIN = 60_000;
const AGENTS = 10_000;

/** A clock the bench moves by hand; sleeps never resolve (the witness task is not started here). */
class HandClock implements Clock {
  t = Date.parse("2026-03-05T10:00:00Z");
  now(): number {
    return this.t;
  }
  sleep(): Promise<void> {
    return new Promise<void>(() => undefined);
  }
}

it("rig: 10,000 agents, half active, a tenth stalled: rows per register, per patrol (and its hold time) and per health report", async () => {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-rig-${Date.now()}`));
  await runInDurableObject(stub, async (_instance, state) => {
    const storage = await SqliteStorage.open(state.storage);
    const clock = new HandClock();
    let rig: Rig | undefined;
    const witness = createWitnessKind(() => rig);
    const harness = await Harness.open(storage, { taskKinds: [erase(witness)], host: { clock } }, call);
    rig = new Rig(harness, { witness, name: "bench" });
    const mayor: Actor = { role: "mayor" };
    const rows: string[] = [];
    const registerRows = (label: string, r0: number, w0: number, ms: number): string =>
      `${label}: ${storage.stats.rowsRead - r0} rows read, ${storage.stats.rowsWritten - w0} rows written, ${ms.toFixed(1)} ms`;
    for (let i = 0; i < AGENTS; i++) {
      const r0 = storage.stats.rowsRead;
      const w0 = storage.stats.rowsWritten;
      const started = performance.now();
      await rig.register(mayor, `polecat-${i}`, { role: "polecat" });
      const ms = performance.now() - started;
      if (i === 1) rows.push(registerRows("register (2nd agent)", r0, w0, ms));
      if (i === AGENTS - 1) {
        rows.push(registerRows(`register (${AGENTS.toLocaleString("en")}th agent)`, r0, w0, ms));
        expect(storage.stats.rowsWritten - w0).toBeLessThan(20);
        expect(storage.stats.rowsRead - r0).toBeLessThan(20);
      }
    }
    for (let i = 0; i < AGENTS / 2; i++) {
      const id = `polecat-${i}`;
      await rig.transition(mayor, id, "set", { work: { bead_id: `gt-${i}`, title: "work" } });
      await rig.transition({ role: "agent", agent: id }, id, "activate");
    }
    // 35 minutes later everyone active but a tenth of all agents has touched.
    clock.t += 35 * MIN;
    for (let i = AGENTS / 10; i < AGENTS / 2; i++)
      await rig.transition({ role: "agent", agent: `polecat-${i}` }, `polecat-${i}`, "touch");

    for (const label of ["first patrol (nudges, health mail)", "second patrol (steady)"]) {
      clock.t += 5 * MIN;
      const r0 = storage.stats.rowsRead;
      const w0 = storage.stats.rowsWritten;
      const started = performance.now();
      const outcome = await harness.commit((tx) => patrol(tx, clock.now(), "bench", storage), call);
      const ms = performance.now() - started;
      rows.push(
        `${label}: ${storage.stats.rowsRead - r0} rows read, ${storage.stats.rowsWritten - w0} rows written, held the line ${ms.toFixed(1)} ms, ${outcome.nudges.length} nudges, ${outcome.mail.length} mails, ${outcome.health.stalledAgents} stalled`,
      );
      expect(outcome.health.stalledAgents).toBe(AGENTS / 10);
    }
    const r0 = storage.stats.rowsRead;
    const health = await rig.health();
    rows.push(
      `health report: ${storage.stats.rowsRead - r0} rows read (${health.totalAgents} agents, ${health.activeAgents} active, ${health.stalledAgents} stalled, ${health.idleAgents} idle)`,
    );
    console.log(`\nrig bench, ${AGENTS.toLocaleString("en")} agents\n  ${rows.join("\n  ")}\n`);
    await harness.close(call);
  });
}, 900_000);
