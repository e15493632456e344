/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "many live background tasks": 100 recurring schedules (every 24 h, none due during
 * the run) live in the root conversation while 100 faux turns (two tool calls each) run, on SQLite in
 * a Durable Object, against the same turns with no schedule. Then a cold reopen. Prints rows read and
 * written per turn, rows read to reopen, and bytes; asserts that live background tasks add nothing to
 * a turn's rows (the scheduler reads the earliest wake, not every task).
 *
 * Run: npm run bench:background
 */
import { expect, it } from "vitest";
import { newSchedule, scheduleDefinition } from "../../src/kinds/schedule.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, parallelAnswer, reading, since, table } from "./session.js";

const TURNS = 100;
const DAY = 24 * 3600_000;

async function run(schedules: number): Promise<(string | number)[]> {
  return inObject(`background-${schedules}`, async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, parallelAnswer(2));
    const root = await s.harness.root(call);
    const c0 = reading(storage, state);
    if (schedules > 0) {
      const t0 = Date.now();
      await s.harness.commit((tx) => {
        for (let i = 0; i < schedules; i++) {
          const spec = {
            conversationId: s.harness.rootId,
            input: `s${i}`,
            mode: "nextRun" as const,
            every: DAY,
            cron: null,
            timezone: null,
          };
          tx.task(scheduleDefinition, {
            conversationId: s.harness.rootId,
            background: true,
            state: newSchedule(spec, t0, t0 + DAY + i * 1000),
          });
        }
      }, call);
    }
    const created = since(c0, reading(storage, state));
    const r0 = reading(storage, state);
    for (let turn = 1; turn <= TURNS; turn++) {
      s.refill();
      await root.prompt({ input: `turn ${turn}` }, call);
    }
    const d = since(r0, reading(storage, state));
    const live = (await storage.scanTasks({ kind: "schedule", limit: 1000 })).items.filter(
      (t) => t.role !== "terminal",
    ).length;
    await s.harness.close(call);
    const cold = SqliteStorage.open(state.storage);
    const o0 = reading(cold, state);
    const again = await openSession(cold, parallelAnswer(2));
    await again.harness.root(call);
    const openRead = since(o0, reading(cold, state)).rowsRead;
    await again.harness.close(call);
    return [
      `${schedules} live schedules`,
      live,
      `${created.rowsRead}/${created.rowsWritten}`,
      d.rowsRead / TURNS,
      d.rowsWritten / TURNS,
      openRead,
      state.storage.sql.databaseSize,
    ];
  });
}

it(`background: ${TURNS} turns with 0 and 100 live recurring schedules (sqlite)`, async () => {
  const none = await run(0);
  const many = await run(100);
  table(
    `bench/workloads background — ${TURNS} turns x (2 calls, 2 tools, answer), SQLite in a Durable Object; rows exact`,
    [
      "run",
      "live schedules after",
      "create rows r/w",
      "rows read/turn",
      "rows written/turn",
      "cold reopen rows read",
      "db bytes",
    ],
    [none, many],
  );
  expect(many[1]).toBe(100);
  expect(Number(many[3])).toBeLessThanOrEqual(Number(none[3]) + 1);
  expect(Number(many[4])).toBeLessThanOrEqual(Number(none[4]) + 1);
}, 600_000);
