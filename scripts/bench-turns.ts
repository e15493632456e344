/**
 * `npm run bench:turns [-- --profile] [-- --turns N]`: runs bench/turns (§10.3 many short turns) under
 * vitest. `--profile` also prints a per-statement SQLite profile (statement, executions, rows read, rows
 * written) of one late turn of each SQLite run; `--turns N` (at least 200) shortens the run on a loaded
 * machine. The options reach the workerd test through vitest's `provide` (bench/vitest.bench.config.ts).
 */
import { spawnSync } from "node:child_process";

const argv = process.argv.slice(2);
let profile = false;
let turns: string | undefined;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--profile") profile = true;
  else if (argv[i] === "--turns") turns = argv[++i];
  else {
    process.stderr.write(`unexpected argument ${String(argv[i])} (options: --profile, --turns N)\n`);
    process.exit(1);
  }
}
if (turns !== undefined && !(Number.isSafeInteger(Number(turns)) && Number(turns) >= 200)) {
  process.stderr.write("--turns must be an integer of at least 200\n");
  process.exit(1);
}
const result = spawnSync("vitest", ["run", "--config", "bench/vitest.bench.config.ts", "bench/turns"], {
  stdio: "inherit",
  env: {
    ...process.env,
    BENCH_TURNS_PROFILE: profile ? "1" : "",
    ...(turns === undefined ? {} : { BENCH_TURNS: turns }),
  },
});
process.exit(result.status ?? 1);
