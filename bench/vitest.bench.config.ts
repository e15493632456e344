import { fileURLToPath } from "node:url";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// Benchmarks run as ordinary vitest files and print their figures; they assert row bounds, never
// wall-clock times. `*.bench.ts` run inside workerd (Durable Objects and SQLite available, but a coarse
// clock); `*.node.bench.ts` run in Node (fine clock, no Workers runtime).
// One folder: `npx vitest run --config bench/vitest.bench.config.ts bench/<folder>`.
const root = fileURLToPath(new URL("..", import.meta.url));
// Options of `npm run bench:turns` (scripts/bench-turns.ts), read by the benches with vitest's inject().
const provide = {
  benchTurns: Number(process.env["BENCH_TURNS"] ?? 2_000),
  benchProfile: process.env["BENCH_TURNS_PROFILE"] === "1",
  // `npm run bench:node` (scripts/bench-node.ts): timed runs per configuration, and the file with the
  // Durable Object run's statement digests and rows ("" when not given).
  benchRuns: Number(process.env["BENCH_RUNS"] ?? 5),
  benchDoTrace: process.env["BENCH_DO_TRACE"] ?? "",
  // Diagnosis: both runs keep the statements of this turn (0: none) and print them on a digest mismatch.
  benchTraceTurn: Number(process.env["BENCH_TRACE_TURN"] ?? 0),
};

// Node has no loader for the migrations' `.sql` text modules (wrangler bundles them with a Text rule):
// the Node benches that open SqliteStorage over node:sqlite get them as string modules.
const sqlText = {
  name: "sql-text",
  enforce: "pre" as const,
  transform(code: string, id: string) {
    return id.endsWith(".sql") ? { code: `export default ${JSON.stringify(code)};`, map: null } : undefined;
  },
};

export default defineConfig({
  root,
  test: {
    testTimeout: 300_000,
    projects: [
      {
        plugins: [cloudflareTest({ wrangler: { configPath: `${root}/wrangler.toml`, environment: "dev" } })],
        test: {
          name: "bench-workerd",
          include: ["bench/**/*.bench.ts"],
          exclude: ["bench/**/*.node.bench.ts"],
          typecheck: { enabled: false },
          testTimeout: 300_000,
          provide,
        },
      },
      {
        plugins: [sqlText],
        test: {
          name: "bench-node",
          include: ["bench/**/*.node.bench.ts"],
          environment: "node",
          testTimeout: 300_000,
          provide,
        },
      },
    ],
  },
});
