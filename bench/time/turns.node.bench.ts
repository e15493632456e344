/**
 * docs/performance.md "Time on Node" (§10.3 many short turns, timed): the bench/turns workload (2,000 faux turns,
 * two tool calls each) on Node with a fine clock, on the memory backend and on `SqliteStorage` over
 * `node:sqlite` (src/storage/node-sqlite.ts, the same synchronous SQL surface a Durable Object gives),
 * without and with a threshold collapse. Each configuration runs `benchRuns` times (interleaved, after
 * one warm-up run that also measures the collapse threshold, and a shorter SQLite warm-up); the tables print medians:
 * harness ms/turn
 * over the whole run and over turns 1-100 and 1901-2000, the provider's own request serialization inside
 * them, JS heap after a forced GC with the harness still open, database bytes (pages, and files with
 * the WAL), and the two ratios docs/performance.md tracks. Before each round, the raw-SQLite floor
 * (bench/turns/floor.ts) on node:sqlite: its late ms/turn (median) beside each configuration's late
 * window timed whole, and the ratio.
 *
 * Rows: `node:sqlite` cannot count billed rows, so one more (untimed) SQLite run of each configuration
 * records a statement digest per window (bench/turns/trace.ts). Given the Durable Object run's digests
 * and rows (`benchDoTrace`, a file `npm run bench:node` writes from bench/turns' output), the digests
 * must be equal and the billed rows printed are the Durable Object's. Asserts that, never times.
 *
 * Run: npm run bench:node [-- --runs N] [-- --turns N] [-- --no-do]
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { expect, inject, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import { NodeSqliteHost } from "../../src/storage/node-sqlite.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { SqlFloor } from "../turns/floor.js";
import { StatementTrace, type TracedRun } from "../turns/trace.js";
import { openWorkload, turnWindows, type RunFigures, type Window } from "../turns/workload.js";

declare module "vitest" {
  export interface ProvidedContext {
    benchTurns: number;
    benchRuns: number;
    benchDoTrace: string;
    benchTraceTurn: number;
  }
}

const TURNS = inject("benchTurns");
const RUNS = inject("benchRuns");
const DO_TRACE = inject("benchDoTrace");
const PROBE_TURN = Math.floor(TURNS / 10);
const WINDOWS = turnWindows(TURNS);
const now = (): number => performance.now();

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

type Backend = "memory" | "sqlite";

interface Measured {
  readonly figures: RunFigures;
  /** Heap used after a forced GC with the harness open, minus the same before it was opened. */
  readonly heapBytes: number;
  readonly pageBytes: number | undefined;
  /** Database file plus WAL and shared-memory files. */
  readonly fileBytes: number | undefined;
  readonly traced: TracedRun | undefined;
}

function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

async function once(backend: Backend, threshold: number, trace: boolean, turns: number = TURNS): Promise<Measured> {
  const heap0 = heapUsed();
  const dir = backend === "sqlite" ? mkdtempSync(join(tmpdir(), "pico-bench-node-")) : undefined;
  const path = dir === undefined ? undefined : join(dir, "session.sqlite");
  const host = path === undefined ? undefined : new NodeSqliteHost({ path });
  const tracer = trace ? new StatementTrace(WINDOWS, inject("benchTraceTurn")) : undefined;
  try {
    const sqlite = host === undefined ? undefined : SqliteStorage.open(tracer === undefined ? host : tracer.wrap(host));
    const storage = sqlite ?? new MemoryStorage();
    const workload = await openWorkload(storage, {
      label: `${backend}${threshold > 0 ? `, threshold ${threshold} tok` : ", no collapse"}`,
      turns,
      windows: WINDOWS,
      collapseThresholdTokens: threshold,
      probeTurn: PROBE_TURN,
      now,
      ...(sqlite === undefined
        ? {}
        : { rows: { read: () => sqlite.stats.rowsRead, written: () => sqlite.stats.rowsWritten } }),
      ...(host === undefined ? {} : { dbBytes: () => host.databaseSize }),
      ...(tracer === undefined
        ? {}
        : { around: (turn: number, phase: "before" | "after") => tracer.around(turn, phase) }),
    });
    await workload.run(1, turns);
    const heapBytes = heapUsed() - heap0;
    // Keep the harness reachable until the heap was measured.
    if (workload.figures.turns !== turns) throw new Error("short run");
    const fileBytes =
      path === undefined ? undefined : fileSize(path) + fileSize(`${path}-wal`) + fileSize(`${path}-shm`);
    return {
      figures: workload.figures,
      heapBytes,
      pageBytes: workload.figures.dbBytes,
      fileBytes,
      traced: tracer?.result(threshold, workload.figures),
    };
  } finally {
    host?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The raw-SQLite floor (bench/turns/floor.ts) on node:sqlite, a file database opened as the harness's:
 * ms per turn of each window, timed whole.
 */
function floorOnce(): number[] {
  const dir = mkdtempSync(join(tmpdir(), "pico-bench-floor-"));
  const host = new NodeSqliteHost({ path: join(dir, "session.sqlite") });
  try {
    const floor = new SqlFloor(host);
    const perTurn: number[] = [];
    let started = 0;
    for (let turn = 1; turn <= TURNS; turn++) {
      if (WINDOWS.some(([from]) => from === turn)) started = now();
      floor.turn(turn);
      WINDOWS.forEach(([from, to], i) => {
        if (to === turn) perTurn[i] = (now() - started) / (to - from + 1);
      });
    }
    return perTurn;
  } finally {
    host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

const perTurn = (w: Window | undefined, v: (w: Window) => number): number =>
  w === undefined ? NaN : v(w) / (w.to - w.from + 1);
/** Harness ms per turn over the whole run (provider factory time excluded). */
const harnessPerTurn = (f: RunFigures): number => (f.totalMs - f.providerMs) / f.turns;
const early = (f: RunFigures): Window | undefined => f.windows[0];
const late = (f: RunFigures): Window | undefined => f.windows[1];

interface Config {
  readonly label: string;
  readonly backend: Backend;
  readonly collapse: boolean;
  readonly runs: Measured[];
}

it(`bench/time: ${TURNS} faux turns on Node (memory and node:sqlite), medians of ${RUNS} runs`, async () => {
  // Warm-up (JIT) and the collapse threshold: the context estimate before turn PROBE_TURN without collapse.
  const warm = await once("memory", 0, false);
  const threshold = warm.figures.probeTokens;
  // SQLite's code paths (storage, node:sqlite) warm up too, so the first timed SQLite run's early
  // window is not its JIT's.
  await once("sqlite", threshold, false, Math.min(TURNS, 400));
  const configs: Config[] = [
    { label: "memory, no collapse", backend: "memory", collapse: false, runs: [] },
    { label: "sqlite (node:sqlite), no collapse", backend: "sqlite", collapse: false, runs: [] },
    { label: `memory, threshold ${threshold} tok`, backend: "memory", collapse: true, runs: [] },
    { label: `sqlite (node:sqlite), threshold ${threshold} tok`, backend: "sqlite", collapse: true, runs: [] },
  ];
  // Interleaved, so a burst of load on the shared machine hits every configuration alike.
  const floors: number[][] = [];
  for (let r = 0; r < RUNS; r++) {
    floors.push(floorOnce());
    for (const c of configs) c.runs.push(await once(c.backend, c.collapse ? threshold : 0, false));
  }

  const m = (c: Config, v: (x: Measured) => number): number => median(c.runs.map(v));
  const f2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : "-");
  const lines: string[] = [
    `\nbench/time — ${TURNS} turns x (2 calls, 2 tools, post_tools, answer) on Node ${process.version}, performance.now(); medians of ${RUNS} runs; ms are harness time (faux factory excluded)`,
    [
      "run".padEnd(44),
      "total s".padStart(7),
      "ms/turn all".padStart(11),
      "ms/turn 1-100".padStart(13),
      `ms/turn ${WINDOWS[1]?.[0] ?? "-"}-${WINDOWS[1]?.[1] ?? "-"}`.padStart(17),
      "of which provider serialization 1-100 / late".padStart(44),
      "late excl. serialization".padStart(24),
      "heap MB".padStart(7),
      "db bytes/turn".padStart(13),
      "files bytes/turn".padStart(16),
    ].join(" | "),
  ];
  for (const c of configs) {
    lines.push(
      [
        c.label.padEnd(44),
        f2(m(c, (x) => x.figures.totalMs / 1000)).padStart(7),
        f2(m(c, (x) => harnessPerTurn(x.figures))).padStart(11),
        f2(m(c, (x) => perTurn(early(x.figures), (w) => w.harnessMs))).padStart(13),
        f2(m(c, (x) => perTurn(late(x.figures), (w) => w.harnessMs))).padStart(17),
        `${f2(m(c, (x) => perTurn(early(x.figures), (w) => w.serializationMs)))} / ${f2(m(c, (x) => perTurn(late(x.figures), (w) => w.serializationMs)))}`.padStart(
          44,
        ),
        f2(m(c, (x) => perTurn(late(x.figures), (w) => w.harnessMs - w.serializationMs))).padStart(24),
        (m(c, (x) => x.heapBytes) / 1e6).toFixed(1).padStart(7),
        (c.backend === "sqlite" ? m(c, (x) => (x.pageBytes ?? 0) / TURNS).toFixed(0) : "-").padStart(13),
        (c.backend === "sqlite" ? m(c, (x) => (x.fileBytes ?? 0) / TURNS).toFixed(0) : "-").padStart(16),
      ].join(" | "),
    );
  }
  const [memNo, sqlNo, memCol, sqlCol] = configs as [Config, Config, Config, Config];
  const ratio = (a: Config, b: Config, v: (x: Measured) => number): string => `${(m(a, v) / m(b, v)).toFixed(2)}x`;
  const growth = (c: Config, v: (w: Window) => number): string =>
    `${(m(c, (x) => perTurn(late(x.figures), v)) / m(c, (x) => perTurn(early(x.figures), v))).toFixed(2)}x`;
  lines.push(
    `SQLite vs memory harness ms/turn, with collapse: whole run ${ratio(sqlCol, memCol, (x) => harnessPerTurn(x.figures))}, late window ${ratio(sqlCol, memCol, (x) => perTurn(late(x.figures), (w) => w.harnessMs))} (target <= 1.3x); no collapse: whole run ${ratio(sqlNo, memNo, (x) => harnessPerTurn(x.figures))}`,
    `harness ms/turn growth, late vs 1-100, no collapse: sqlite ${growth(sqlNo, (w) => w.harnessMs)} (excluding the provider's serialization ${growth(sqlNo, (w) => w.harnessMs - w.serializationMs)}; target <= 1.5x), memory ${growth(memNo, (w) => w.harnessMs)} (excl. ${growth(memNo, (w) => w.harnessMs - w.serializationMs)}); with collapse: sqlite ${growth(sqlCol, (w) => w.harnessMs)}, memory ${growth(memCol, (w) => w.harnessMs)}`,
    `provider serialization = the faux provider's prompt text for its usage estimate (from the factory's return to the first stream event); heap = heapUsed after gc with the harness open, minus before`,
  );
  // The floor, a run of it before each round: late ms/turn against each configuration's late window
  // timed whole (provider factory included, as the floor comparison of bench/turns does).
  const floorLate = median(floors.map((f) => f[1] ?? NaN));
  lines.push(
    `raw-SQLite floor (bench/turns/floor.ts on node:sqlite, the same rows in the same 10 transactions a turn, no harness), medians of ${RUNS}: ms/turn 1-100 ${f2(median(floors.map((f) => f[0] ?? NaN)))}, late ${f2(floorLate)} (runs: ${floors.map((f) => f2(f[1] ?? NaN)).join(", ")})`,
    ...configs.map((c) => {
      const lateMs = m(c, (x) => perTurn(late(x.figures), (w) => w.windowMs));
      return `  ${c.label}: late ms/turn (whole window) ${f2(lateMs)} = ${(lateMs / floorLate).toFixed(1)}x the floor; 1-100 ${f2(m(c, (x) => perTurn(early(x.figures), (w) => w.windowMs)))}`;
    }),
  );
  console.log(lines.join("\n"));

  // Rows: one traced (untimed) SQLite run per configuration, compared with the Durable Object's.
  const tracedNo = await once("sqlite", 0, true);
  const tracedCol = await once("sqlite", threshold, true);
  const expected: { turns: number; runs: TracedRun[] } | undefined =
    DO_TRACE === "" ? undefined : (JSON.parse(readFileSync(DO_TRACE, "utf8")) as { turns: number; runs: TracedRun[] });
  const rows: string[] = [
    `\nrows per turn, ${DO_TRACE === "" ? "no Durable Object trace given (node:sqlite lower bounds only: rows returned / changes())" : "billed rows of the Durable Object run, same statement digest"}`,
    `${"run".padEnd(44)} | ${"window".padEnd(9)} | ${"digest (node)".padEnd(16)} | ${"statements".padStart(10)} | ${"digest (DO)".padEnd(16)} | ${"rows r/w per turn (DO)".padStart(22)} | ${"node:sqlite returned/changes".padStart(28)}`,
  ];
  for (const [label, traced, collapse] of [
    [sqlNo.label, tracedNo.traced, false],
    [sqlCol.label, tracedCol.traced, true],
  ] as const) {
    if (traced === undefined) throw new Error("untraced run");
    const other = expected?.runs.find((r) => r.threshold > 0 === collapse);
    traced.windows.forEach((w, i) => {
      const d = other?.windows[i];
      const n = w.to - w.from + 1;
      rows.push(
        `${label.padEnd(44)} | ${`${w.from}-${w.to}`.padEnd(9)} | ${w.digest.padEnd(16)} | ${String(w.statements).padStart(10)} | ${(d?.digest ?? "-").padEnd(16)} | ${(d === undefined ? "-" : `${(d.rowsRead / n).toFixed(2)}/${(d.rowsWritten / n).toFixed(2)}`).padStart(22)} | ${`${(w.rowsRead / n).toFixed(2)}/${(w.rowsWritten / n).toFixed(2)}`.padStart(28)}`,
      );
    });
  }
  console.log(rows.join("\n"));
  if (expected !== undefined) {
    // Diagnosis before the assertion: the first turn whose statements differ, and the dumped turn.
    for (const [traced, collapse] of [
      [tracedNo.traced, false],
      [tracedCol.traced, true],
    ] as const) {
      const other = expected.runs.find((r) => r.threshold > 0 === collapse);
      traced?.windows.forEach((w, i) => {
        const d = other?.windows[i];
        const at = w.turns.findIndex((t, k) => t !== d?.turns[k]);
        if (at >= 0)
          console.log(`${collapse ? "collapse" : "no collapse"}: first turn with different statements: ${w.from + at}`);
      });
      if (traced !== undefined && traced.dump.length > 0) {
        const theirs = other?.dump ?? [];
        const diff = traced.dump.flatMap((line, k) =>
          line.replace(/ \[r\d+ w\d+\]$/, "") === theirs[k]?.replace(/ \[r\d+ w\d+\]$/, "")
            ? []
            : [`node ${line}`, `DO   ${theirs[k] ?? "-"}`],
        );
        console.log(
          `dumped turn, ${collapse ? "collapse" : "no collapse"}: ${traced.dump.length} / ${theirs.length} statements\n${diff.join("\n")}`,
        );
      }
    }
    expect(expected.turns).toBe(TURNS);
    for (const [traced, collapse] of [
      [tracedNo.traced, false],
      [tracedCol.traced, true],
    ] as const) {
      const other = expected.runs.find((r) => r.threshold > 0 === collapse);
      expect(other?.threshold).toBe(traced?.threshold);
      expect(traced?.windows.map((w) => [w.digest, w.statements])).toEqual(
        other?.windows.map((w) => [w.digest, w.statements]),
      );
    }
  }
}, 3_600_000);
