/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "many short turns with tools": 2,000 faux turns in one conversation, each with two tool calls
 * (generation with 2 calls -> 2 tools -> post_tools -> generation with the final answer), on memory and
 * on SQLite inside a Durable Object (slices of turns per runInDurableObject callback on the same
 * object), then again with a threshold collapse tuned to fire about every 200 turns
 * (collapseThresholdTokens = the context estimate measured before turn 200 of the run without collapse).
 * Prints total time, harness time per turn over turns 1-100 and 1901-2000 (provider time, spent inside
 * the faux factory, measured separately), SQLite rows read/written per turn over the same windows,
 * scratch commits and bytes per streamed token, and database bytes per turn. Then the raw-SQLite floor
 * (floor.ts: the same rows per turn in the same transactions, plain SQL, no harness) in an object of its
 * own, and each run's late window against it: every window timed whole, between two timer waits that
 * bring workerd's clock up to date (late = the last 5% of turns). Times come from workerd's
 * coarse clock (it advances on I/O), so they are indicative only; rows are exact. Asserts row-count
 * shapes only, never times.
 *
 * Run: npm run bench:turns [-- --profile] [-- --turns N]. `--profile` prints a per-statement profile
 * (statement, rows written, rows read, executions) of the last turn of each SQLite run.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, inject, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { SqlFloor } from "./floor.js";
import { StatementTrace, traceRuns, type TracedRun } from "./trace.js";
import {
  openWorkload,
  turnWindows,
  printFigures,
  printProfile,
  type ProfileRow,
  type RunFigures,
  type Workload,
} from "./workload.js";

declare module "vitest" {
  export interface ProvidedContext {
    benchTurns: number;
    benchProfile: boolean;
    benchTraceTurn: number;
  }
}

const TURNS = inject("benchTurns");
const PROFILE = inject("benchProfile");
/** The collapse threshold is the context measured before this turn, so collapses fire about every PROBE_TURN turns. */
const PROBE_TURN = Math.floor(TURNS / 10);
const SLICE = 250;
const WINDOWS = turnWindows(TURNS);
const now = (): number => performance.now();
/**
 * workerd's clock stands still while JavaScript runs and moves on I/O: a timer brings it up to date, so
 * a window timed between two of these includes everything that ran in it.
 */
const sync = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

async function onMemory(label: string, threshold: number): Promise<RunFigures> {
  const w = await openWorkload(new MemoryStorage(), {
    label,
    turns: TURNS,
    windows: WINDOWS,
    collapseThresholdTokens: threshold,
    probeTurn: PROBE_TURN,
    now,
    sync,
  });
  await w.run(1, TURNS);
  return w.figures;
}

const profiles: { label: string; rows: ProfileRow[] }[] = [];
/** Statement digests and rows per window of each SQLite run, printed as one JSON line for `npm run bench:node`. */
const traced: TracedRun[] = [];

async function onSqlite(label: string, threshold: number): Promise<RunFigures> {
  const trace = new StatementTrace(WINDOWS, inject("benchTraceTurn"));
  let profiled: ReadonlyMap<string, ProfileRow> | undefined;
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-turns-${label}-${Date.now()}`));
  let workload: Workload | undefined;
  for (let from = 1; from <= TURNS; from += SLICE) {
    await runInDurableObject(stub, async (_instance, state) => {
      if (workload === undefined) {
        const storage = SqliteStorage.open(trace.wrap(state.storage));
        workload = await openWorkload(storage, {
          label,
          turns: TURNS,
          windows: WINDOWS,
          collapseThresholdTokens: threshold,
          probeTurn: PROBE_TURN,
          now,
          sync,
          rows: { read: () => storage.stats.rowsRead, written: () => storage.stats.rowsWritten },
          dbBytes: () => state.storage.sql.databaseSize,
          around: (turn, phase) => {
            trace.around(turn, phase);
            if (!PROFILE || turn !== TURNS) return;
            if (phase === "before") profiled = storage.profile();
            else storage.stopProfile();
          },
        });
      }
      await workload.run(from, Math.min(TURNS, from + SLICE - 1));
    });
  }
  if (workload === undefined) throw new Error("no workload");
  if (profiled !== undefined) profiles.push({ label, rows: [...profiled.values()] });
  traced.push(trace.result(threshold, workload.figures));
  return workload.figures;
}

interface FloorFigures {
  readonly windows: { from: number; to: number; ms: number; rowsRead: number; rowsWritten: number }[];
}

/**
 * The raw-SQLite floor (floor.ts) in a Durable Object of its own, in slices of SLICE turns per
 * runInDurableObject callback as the harness runs; each window is timed whole between two clock syncs.
 */
async function onFloor(): Promise<FloorFigures> {
  const figures: FloorFigures = {
    windows: WINDOWS.map(([from, to]) => ({ from, to, ms: 0, rowsRead: 0, rowsWritten: 0 })),
  };
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-turns-floor-${Date.now()}`));
  let floor: SqlFloor | undefined;
  let started = 0;
  let rows = { read: 0, written: 0 };
  for (let from = 1; from <= TURNS; from += SLICE) {
    await runInDurableObject(stub, async (_instance, state) => {
      floor ??= new SqlFloor(state.storage);
      for (let turn = from; turn <= Math.min(TURNS, from + SLICE - 1); turn++) {
        const window = figures.windows.find((w) => w.from === turn);
        if (window !== undefined) {
          await sync();
          started = now();
          rows = { read: floor.rows.rowsRead, written: floor.rows.rowsWritten };
        }
        floor.turn(turn);
        for (const w of figures.windows) {
          if (w.to !== turn) continue;
          await sync();
          w.ms = now() - started;
          w.rowsRead = floor.rows.rowsRead - rows.read;
          w.rowsWritten = floor.rows.rowsWritten - rows.written;
        }
      }
    });
  }
  return figures;
}

/**
 * The floor beside the harness runs: each floor run's windows, and each harness run's late ms/turn
 * (whole windows) against the median of the floor runs' late windows.
 */
function printFloor(floors: readonly FloorFigures[], runs: readonly RunFigures[]): void {
  const perTurn = (ms: number, w: { from: number; to: number }): number => ms / (w.to - w.from + 1);
  const lates = floors.map((f) => f.windows[1]).filter((w) => w !== undefined);
  const sorted = lates.map((w) => perTurn(w.ms, w)).sort((a, b) => a - b);
  const floorLate = sorted[Math.floor(sorted.length / 2)];
  const [first] = floors;
  const [fEarly, fLate] = first?.windows ?? [];
  if (floorLate === undefined || fEarly === undefined || fLate === undefined) throw new Error("no floor windows");
  const rows = (w: { from: number; to: number; rowsRead: number; rowsWritten: number }): string =>
    `${(w.rowsRead / (w.to - w.from + 1)).toFixed(2)}/${(w.rowsWritten / (w.to - w.from + 1)).toFixed(2)}`;
  const lines = [
    `\nraw-SQLite floor (bench/turns/floor.ts: the same rows in the same 10 transactions a turn, plain SQL, no harness; ${floors.length} runs interleaved with the harness runs, median late window) vs the harness; ms/turn = a whole window's wall time between two clock syncs / its turns (provider included)`,
    `${"run".padEnd(34)} | ${`ms/turn ${fEarly.from}-${fEarly.to}`.padStart(18)} | ${`ms/turn ${fLate.from}-${fLate.to}`.padStart(18)} | ${"late x floor".padStart(12)} | ${"late rows r/w per turn".padStart(22)}`,
  ];
  floors.forEach((f, i) => {
    const [e, l] = f.windows;
    if (e === undefined || l === undefined) return;
    lines.push(
      `${`floor (raw SQLite, DO) #${i + 1}`.padEnd(34)} | ${perTurn(e.ms, e).toFixed(3).padStart(18)} | ${perTurn(l.ms, l).toFixed(3).padStart(18)} | ${`${(perTurn(l.ms, l) / floorLate).toFixed(1)}x`.padStart(12)} | ${rows(l).padStart(22)}`,
    );
  });
  for (const r of runs) {
    const [early, late] = r.windows;
    if (early === undefined || late === undefined) continue;
    const lateMs = perTurn(late.windowMs, late);
    lines.push(
      `${r.label.padEnd(34)} | ${perTurn(early.windowMs, early).toFixed(3).padStart(18)} | ${lateMs.toFixed(3).padStart(18)} | ${`${(lateMs / floorLate).toFixed(1)}x`.padStart(12)} | ${(r.label.startsWith("sqlite") ? rows(late) : "-").padStart(22)}`,
    );
  }
  console.log(lines.join("\n"));
}

it(`bench/turns: ${TURNS} faux turns with two tool calls each, memory and SQLite, without and with a threshold collapse`, async () => {
  // The floor runs three times, between the harness runs, so a burst of load on the shared machine
  // does not decide the ratios alone.
  const floors = [await onFloor()];
  const memory = await onMemory("memory, no collapse", 0);
  const sqlite = await onSqlite("sqlite (DO), no collapse", 0);
  floors.push(await onFloor());
  const threshold = memory.probeTokens;
  const memoryCollapse = await onMemory(`memory, threshold ${threshold} tok`, threshold);
  const sqliteCollapse = await onSqlite(`sqlite (DO), threshold ${threshold} tok`, threshold);
  floors.push(await onFloor());
  printFigures(
    `bench/turns — ${TURNS} turns x (2 calls, 2 tools, post_tools, answer); ms from workerd's coarse clock; rows exact`,
    [memory, sqlite, memoryCollapse, sqliteCollapse],
  );
  printFloor(floors, [memory, sqlite, memoryCollapse, sqliteCollapse]);
  console.log(traceRuns(TURNS, traced));
  for (const p of profiles)
    printProfile(`profile of turn ${TURNS}, ${p.label}: rows written, rows read, executions per statement`, p.rows);
  for (const run of [sqlite, sqliteCollapse]) {
    const [early, late] = run.windows;
    // Rows per turn must not grow with history: the late window reads and writes like the early one.
    expect(late!.rowsRead / 100).toBeLessThanOrEqual((early!.rowsRead / 100) * 1.5 + 20);
    expect(late!.rowsWritten / 100).toBeLessThanOrEqual((early!.rowsWritten / 100) * 1.5 + 20);
  }
  expect(memoryCollapse.collapses).toBeGreaterThanOrEqual(5);
  expect(sqliteCollapse.collapses).toBe(memoryCollapse.collapses);
}, 900_000);
