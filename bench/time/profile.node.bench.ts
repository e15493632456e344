/**
 * docs/performance.md "Cost per turn": a CPU profile of the harness's late window. Runs the bench/turns
 * workload on Node (memory and `SqliteStorage` over `node:sqlite`, without and with the threshold
 * collapse, as bench/time does), samples the late window (the last 5% of turns) with `node:inspector`'s
 * profiler (100 µs interval), and prints per configuration the top functions by self time and the
 * top functions of this repository (src/, bench/) by inclusive time, in ms per turn. Figures, not
 * assertions.
 *
 * Run: npx vitest run --config bench/vitest.bench.config.ts --project bench-node bench/time/profile.node.bench.ts
 * (BENCH_TURNS=N shortens it; default 2,000 turns).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { Session, type Profiler, type Runtime } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import { NodeSqliteHost } from "../../src/storage/node-sqlite.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { openWorkload, turnWindows } from "../turns/workload.js";

declare module "vitest" {
  export interface ProvidedContext {
    benchTurns: number;
  }
}

const TURNS = inject("benchTurns");
const WINDOWS = turnWindows(TURNS);
const LATE = WINDOWS[1] ?? [TURNS, TURNS];
const TOP = 25;

interface Sampled {
  readonly label: string;
  readonly profile: Profiler.Profile;
  readonly turns: number;
  readonly probeTokens: number;
}

async function profiled(backend: "memory" | "sqlite", threshold: number, session: Session): Promise<Sampled> {
  const dir = backend === "sqlite" ? mkdtempSync(join(tmpdir(), "pico-bench-profile-")) : undefined;
  const host = dir === undefined ? undefined : new NodeSqliteHost({ path: join(dir, "session.sqlite") });
  try {
    const storage = host === undefined ? new MemoryStorage() : SqliteStorage.open(host);
    const workload = await openWorkload(storage, {
      label: backend,
      turns: TURNS,
      windows: WINDOWS,
      collapseThresholdTokens: threshold,
      probeTurn: Math.floor(TURNS / 10),
      now: () => performance.now(),
    });
    await workload.run(1, LATE[0] - 1);
    await session.post("Profiler.start");
    await workload.run(LATE[0], LATE[1]);
    const { profile } = await session.post("Profiler.stop");
    return {
      label: `${backend}, ${threshold > 0 ? `threshold ${threshold} tok` : "no collapse"}`,
      profile,
      turns: LATE[1] - LATE[0] + 1,
      probeTokens: workload.figures.probeTokens,
    };
  } finally {
    host?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** A function's name and place, short: `name file:line`. */
function frameKey(frame: Runtime.CallFrame): string {
  const file = frame.url.replace(/^.*\/(src|bench|node_modules)\//, "$1/");
  return `${frame.functionName || "(anonymous)"} ${file}${file === "" ? "" : `:${frame.lineNumber + 1}`}`;
}

function report(s: Sampled): string {
  const nodes = new Map(s.profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of s.profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const samples = s.profile.samples ?? [];
  const deltas = s.profile.timeDeltas ?? [];
  let total = 0;
  samples.forEach((id, i) => {
    // A sample's time is the delta to the next sample.
    const us = deltas[i + 1] ?? 0;
    total += us;
    const node = nodes.get(id);
    if (node === undefined) return;
    const key = frameKey(node.callFrame);
    self.set(key, (self.get(key) ?? 0) + us);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = nodes.get(at)?.callFrame;
      if (frame === undefined) continue;
      const k = frameKey(frame);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
  });
  const perTurn = (us: number): string => (us / 1000 / s.turns).toFixed(3).padStart(8);
  const pct = (us: number): string => `${((100 * us) / Math.max(total, 1)).toFixed(1)}%`.padStart(6);
  const top = (m: Map<string, number>, keep: (k: string) => boolean): string[] =>
    [...m.entries()]
      .filter(([k]) => keep(k))
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([k, us]) => `${perTurn(us)} ${pct(us)}  ${k}`);
  return [
    `\nprofile of turns ${LATE[0]}-${LATE[1]}, ${s.label}: ${(total / 1000 / s.turns).toFixed(3)} ms/turn sampled`,
    `self: ms/turn, share, function`,
    ...top(self, () => true),
    `inclusive, functions of this repository: ms/turn, share, function`,
    ...top(inclusive, (k) => / (src|bench)\//.test(k)),
  ].join("\n");
}

it(`bench/time profile: late window of ${TURNS} faux turns, memory and node:sqlite`, async () => {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 100 });
  try {
    const memory = await profiled("memory", 0, session);
    const threshold = memory.probeTokens;
    const runs = [
      memory,
      await profiled("sqlite", 0, session),
      await profiled("memory", threshold, session),
      await profiled("sqlite", threshold, session),
    ];
    for (const r of runs) console.log(report(r));
  } finally {
    session.disconnect();
  }
}, 3_600_000);
