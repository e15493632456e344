/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "deep forks with repeated historical reads": 40 faux turns in the root, then a chain of 20
 * forks, each at the tip of the one before and given 3 turns of its own, on SQLite in a Durable Object.
 * Then a cold reopen (fresh storage object and harness) and, in the deepest fork: its context at the
 * tip, 50 historical contexts at entries spread over the whole chain, and the same 50 again. Prints
 * rows read per read (fork-aware reads cost fork depth plus the range), bytes, and the build's rows.
 *
 * Run: npm run bench:forks
 */
import { expect, it } from "vitest";
import type { ConversationHandle } from "../../src/core/conversation.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, parallelAnswer, reading, since, table } from "./session.js";

const ROOT_TURNS = 40;
const DEPTH = 20;
const FORK_TURNS = 3;
const READS = 50;

it(`forks: a chain of ${DEPTH} forks, then ${READS} historical reads twice after a cold reopen (sqlite)`, async () => {
  const rows = await inObject("forks", async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, parallelAnswer(1));
    const r0 = reading(storage, state);
    let conversation: ConversationHandle = await s.harness.root(call);
    let turns = 0;
    for (let turn = 1; turn <= ROOT_TURNS; turn++) {
      s.refill();
      await conversation.prompt({ input: `root ${turn}` }, call);
      turns++;
    }
    for (let depth = 1; depth <= DEPTH; depth++) {
      const tip = await conversation.contextEntries(undefined, call);
      conversation = await conversation.fork({ at: tip.ids[tip.ids.length - 1] as number }, call);
      for (let turn = 1; turn <= FORK_TURNS; turn++) {
        s.refill();
        await conversation.prompt({ input: `fork ${depth}.${turn}` }, call);
        turns++;
      }
    }
    const build = since(r0, reading(storage, state));
    const deepest = conversation.id;
    await s.harness.close(call);

    const cold = SqliteStorage.open(state.storage);
    const again = await openSession(cold, parallelAnswer(1));
    const handle = await again.harness.conversation(deepest, call);
    if (handle === undefined) throw new Error("deepest fork not found");
    const c0 = reading(cold, state);
    const tip = await handle.contextEntries(undefined, call);
    const tipRead = since(c0, reading(cold, state)).rowsRead;
    const targets = Array.from(
      { length: READS },
      (_, i) => tip.ids[Math.floor((i * (tip.ids.length - 1)) / READS)] as number,
    );
    const pass = async (): Promise<number> => {
      const p0 = reading(cold, state);
      for (const at of targets) await handle.contextEntries(at, call);
      return since(p0, reading(cold, state)).rowsRead / READS;
    };
    const first = await pass();
    const second = await pass();
    await again.harness.close(call);
    return { turns, build, bytes: state.storage.sql.databaseSize, items: tip.items.length, tipRead, first, second };
  });
  table(
    `bench/workloads forks — ${ROOT_TURNS} root turns + ${DEPTH} chained forks x ${FORK_TURNS} turns (1 call each), SQLite in a Durable Object; rows exact`,
    ["figure", "value"],
    [
      [
        "build rows r/w per turn",
        `${(rows.build.rowsRead / rows.turns).toFixed(1)}/${(rows.build.rowsWritten / rows.turns).toFixed(1)}`,
      ],
      ["db bytes", rows.bytes],
      ["deepest fork: context items at the tip", rows.items],
      ["cold: rows read for the tip context", rows.tipRead],
      [`rows read per historical read, first ${READS}`, rows.first],
      [`rows read per historical read, same ${READS} again`, rows.second],
    ],
  );
  expect(rows.items).toBeGreaterThan(ROOT_TURNS);
}, 600_000);
