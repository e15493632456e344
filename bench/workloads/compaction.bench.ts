/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "frequent compaction plus cold reopen": 200 faux turns (two tool calls each) on SQLite in a
 * Durable Object, with a collapse after every 20th turn and without, then a cold reopen (a fresh
 * storage object and harness over the same database, as after an eviction): rows read to open, to
 * derive the context, and to answer one more prompt. Prints rows and bytes; asserts that compaction
 * keeps the reopened context read bounded (it does not read the collapsed history).
 *
 * Run: npm run bench:compaction
 */
import { expect, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, parallelAnswer, reading, since, table } from "./session.js";

const TURNS = 200;
const EVERY = 20;

interface Figures {
  readonly label: string;
  readonly collapses: number;
  readonly buildRead: number;
  readonly buildWritten: number;
  readonly bytes: number;
  readonly openRead: number;
  readonly contextRead: number;
  readonly contextItems: number;
  readonly answerRead: number;
  readonly answerWritten: number;
}

async function run(label: string, collapseEvery: number | undefined): Promise<Figures> {
  return inObject(`compaction-${collapseEvery ?? 0}`, async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, parallelAnswer(2));
    const root = await s.harness.root(call);
    const r0 = reading(storage, state);
    let collapses = 0;
    for (let turn = 1; turn <= TURNS; turn++) {
      s.refill();
      await root.prompt({ input: `turn ${turn}` }, call);
      if (collapseEvery !== undefined && turn % collapseEvery === 0) {
        await s.harness.driver.waitForTask(await root.collapse(undefined, call), undefined, call);
        collapses++;
      }
    }
    const build = since(r0, reading(storage, state));
    await s.harness.close(call);

    // Cold reopen over the same database.
    const cold = SqliteStorage.open(state.storage);
    const o0 = reading(cold, state);
    const again = await openSession(cold, parallelAnswer(2));
    const reopened = await again.harness.root(call);
    const o1 = reading(cold, state);
    const context = await reopened.contextEntries(undefined, call);
    const o2 = reading(cold, state);
    const answer = await reopened.prompt({ input: "after reopen" }, call);
    if (answer?.kind !== "assistant") throw new Error(`no answer after the reopen (${String(answer?.kind)})`);
    const o3 = reading(cold, state);
    await again.harness.close(call);
    return {
      label,
      collapses,
      buildRead: build.rowsRead / TURNS,
      buildWritten: build.rowsWritten / TURNS,
      bytes: state.storage.sql.databaseSize,
      openRead: since(o0, o1).rowsRead,
      contextRead: since(o1, o2).rowsRead,
      contextItems: context.items.length,
      answerRead: since(o2, o3).rowsRead,
      answerWritten: since(o2, o3).rowsWritten,
    };
  });
}

it(`compaction: ${TURNS} turns with a collapse every ${EVERY} turns vs none, then a cold reopen (sqlite)`, async () => {
  const none = await run("no collapse", undefined);
  const frequent = await run(`collapse every ${EVERY} turns`, EVERY);
  table(
    `bench/workloads compaction — ${TURNS} turns x (2 calls, 2 tools, answer), SQLite in a Durable Object; rows exact`,
    [
      "run",
      "collapses",
      "rows r/w per turn",
      "db bytes",
      "reopen: open rows read",
      "context rows read (items)",
      "first answer rows r/w",
    ],
    [none, frequent].map((f) => [
      f.label,
      f.collapses,
      `${f.buildRead.toFixed(1)}/${f.buildWritten.toFixed(1)}`,
      f.bytes,
      f.openRead,
      `${f.contextRead} (${f.contextItems})`,
      `${f.answerRead}/${f.answerWritten}`,
    ]),
  );
  expect(frequent.collapses).toBe(TURNS / EVERY);
  // The reopened context reads from the newest summary on, not the whole history.
  expect(frequent.contextRead).toBeLessThan(none.contextRead);
}, 600_000);
