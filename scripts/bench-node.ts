/**
 * `npm run bench:node [-- --runs N] [-- --turns N] [-- --no-do]`: docs/performance.md "Time on Node".
 * First runs bench/turns in workerd (the Durable Object run; its output is shown) and keeps the JSON
 * line with each SQLite run's statement digests and billed rows per window; then runs bench/time (Node,
 * memory and node:sqlite, medians of N timed runs, default 5), which checks that its own statement
 * digests equal the Durable Object's and prints the billed rows. `--no-do` skips the Durable Object run
 * (no row check; node:sqlite lower bounds only). `--turns N` (at least 200) shortens both.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const MARKER = "BENCH_TURNS_TRACE ";

const argv = process.argv.slice(2);
let runs = "5";
let turns: string | undefined;
let withDo = true;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--runs") runs = String(argv[++i]);
  else if (argv[i] === "--turns") turns = String(argv[++i]);
  else if (argv[i] === "--no-do") withDo = false;
  else {
    process.stderr.write(`unexpected argument ${String(argv[i])} (options: --runs N, --turns N, --no-do)\n`);
    process.exit(1);
  }
}
if (!(Number.isSafeInteger(Number(runs)) && Number(runs) >= 1)) {
  process.stderr.write("--runs must be a positive integer\n");
  process.exit(1);
}
if (turns !== undefined && !(Number.isSafeInteger(Number(turns)) && Number(turns) >= 200)) {
  process.stderr.write("--turns must be an integer of at least 200\n");
  process.exit(1);
}
const env = { ...process.env, BENCH_RUNS: runs, ...(turns === undefined ? {} : { BENCH_TURNS: turns }) };
const dir = mkdtempSync(join(tmpdir(), "pico-bench-node-"));
try {
  let traceFile = "";
  if (withDo) {
    const workerd = spawnSync("vitest", ["run", "--config", "bench/vitest.bench.config.ts", "bench/turns"], {
      stdio: ["inherit", "pipe", "inherit"],
      env: { ...env, BENCH_TURNS_PROFILE: "" },
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    process.stdout.write(workerd.stdout);
    if (workerd.status !== 0) process.exit(workerd.status ?? 1);
    const line = workerd.stdout
      .replace(/\u001b\[[0-9;]*m/g, "")
      .split("\n")
      .find((l) => l.startsWith(MARKER));
    if (line === undefined) {
      process.stderr.write("bench/turns printed no statement trace\n");
      process.exit(1);
    }
    traceFile = join(dir, "do-trace.json");
    writeFileSync(traceFile, line.slice(MARKER.length));
  }
  const node = spawnSync(
    "vitest",
    ["run", "--config", "bench/vitest.bench.config.ts", "--project", "bench-node", "bench/time/turns.node.bench.ts"],
    {
      stdio: "inherit",
      env: { ...env, BENCH_DO_TRACE: traceFile },
    },
  );
  process.exitCode = node.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
