/**
 * `npm run bench:export` (docs/performance.md "Session export and import"): first the Node bench
 * (bench/time/export.node.bench.ts: export and import times and peak memory for 50,000 entries and for one 20 MiB
 * session), which also writes two exports of about 64 MiB (the import body cap); then each of those is imported into
 * a `wrangler dev --local` (its own port and state directory, scripts/bench-load-dev.ts) over HTTP, and the CPU time
 * of the workerd process that runs the Worker and its Durable Objects is read from /proc before and after
 * (user + system). workerd's local runtime does not enforce `limits.cpu_ms`, so this is how an import's CPU is known
 * before Cloudflare counts it: the figure is an upper bound of the object's (it includes the Worker's routing and
 * streaming of the body, and whatever else the process did meanwhile).
 *
 * BENCH_EXPORT_WORKERD=0 skips the workerd part. Linux only (/proc).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, findRuntime, root, startDev, stopDev, token } from "./bench-load-dev.ts";

const dir = mkdtempSync(join(tmpdir(), "pico-bench-export-"));
const load = (): string => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

const inWorkerd = process.env["BENCH_EXPORT_WORKERD"] !== "0";

try {
  process.stdout.write(`load average before: ${load()}\n`);
  const node = spawnSync(
    join(root, "node_modules/.bin/vitest"),
    ["run", "--config", "bench/vitest.bench.config.ts", "--project", "bench-node", "bench/time/export.node.bench.ts"],
    {
      cwd: root,
      stdio: "inherit",
      // --expose-gc: each measurement starts after a collection, so its heap growth is its own.
      env: {
        ...process.env,
        ...(inWorkerd ? { BENCH_IMPORT_DIR: dir } : {}),
        NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --expose-gc`,
      },
    },
  );
  if (node.status !== 0) throw new Error(`the Node bench failed (${node.status ?? node.signal})`);
  if (inWorkerd) await workerd();
  process.stdout.write(`load average after: ${load()}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

async function workerd(): Promise<void> {
  const dev = await startDev();
  try {
    const tenant = "bench-export";
    const operator = await token(tenant, { role: "operator" });
    // An object first, so the runtime process holds the persisted SQLite files open (findRuntime tells it apart).
    const warm = await fetch(`${dev.base}/v1/sessions/warm`, {
      method: "PUT",
      headers: { authorization: `Bearer ${operator}`, "content-type": "application/json" },
      body: "{}",
    });
    if (warm.status !== 201) throw new Error(`PUT warm: ${warm.status} ${await warm.text()}`);
    const runtime = findRuntime(dev);
    process.stdout.write(`\nworkerd (wrangler dev --local; the Worker's runtime process: ${runtime.how})\n`);
    for (const name of ["small", "large"]) {
      const file = join(dir, `${name}.jsonl`);
      const bytes = statSync(file).size;
      const body = readFileSync(file);
      const cpu0 = cpuMs(runtime.worker);
      const proxy0 = cpuMs(runtime.proxy);
      const wall0 = performance.now();
      const response = await fetch(`${dev.base}/v1/sessions/imported-${name}/import`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${operator}`,
          "content-type": "application/jsonl",
          "content-length": String(bytes),
        },
        body,
      });
      const answer = await response.text();
      const wall = performance.now() - wall0;
      const cpu = cpuMs(runtime.worker) - cpu0;
      const proxy = cpuMs(runtime.proxy) - proxy0;
      if (response.status !== 201) throw new Error(`import ${name}: ${response.status} ${answer.slice(0, 500)}`);
      const lastSeq = (JSON.parse(answer) as { lastSeq: number }).lastSeq;
      process.stdout.write(
        [
          `import of ${name}.jsonl: ${(bytes / 1024 / 1024).toFixed(1)} MB, lastSeq ${lastSeq}`,
          `  runtime CPU (user + system)  ${cpu.toFixed(0)} ms (wall ${wall.toFixed(0)} ms)`,
          `  wrangler's proxy CPU         ${Number.isNaN(proxy) ? "n/a" : `${proxy.toFixed(0)} ms`}`,
        ].join("\n") + "\n",
      );
    }
  } finally {
    await stopDev(dev);
  }
}
