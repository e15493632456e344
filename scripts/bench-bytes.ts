/**
 * `npm run bench:bytes [-- --turns N]`: runs bench/bytes (docs/performance.md: where the database bytes of the §10.3
 * many-short-turns workload go) under vitest in workerd; N turns, default 200.
 */
import { spawnSync } from "node:child_process";

const argv = process.argv.slice(2);
let turns = "200";
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--turns") turns = String(argv[++i]);
  else {
    process.stderr.write(`unexpected argument ${String(argv[i])} (options: --turns N)\n`);
    process.exit(1);
  }
}
if (!(Number.isSafeInteger(Number(turns)) && Number(turns) >= 1)) {
  process.stderr.write("--turns must be a positive integer\n");
  process.exit(1);
}
const result = spawnSync("vitest", ["run", "--config", "bench/vitest.bench.config.ts", "bench/bytes"], {
  stdio: "inherit",
  env: { ...process.env, BENCH_TURNS: turns },
});
process.exit(result.status ?? 1);
