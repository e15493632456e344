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
};

export default defineConfig({
  root,
  test: {
    testTimeout: 300_000,
    projects: [
      {
        plugins: [cloudflareTest({ wrangler: { configPath: `${root}/wrangler.toml` } })],
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
