/**
 * `npm run bench:coldstart [-- --runs N]`: the cold start of §10.3 (docs/performance.md), a fresh workerd to the
 * first answered request. Each run starts `wrangler dev --local` on port 8871 (inspector 9371) with an
 * empty state directory, then times, from the spawn: wrangler's "Ready" line (bundling and workerd
 * start), the first answered `GET /health`, the first session created (`PUT /v1/sessions/:id`: a
 * Durable Object and its SQLite migrations) and the first input answered by the echo model
 * (`POST .../inputs?wait=10`). Prints each run and the medians (default 5 runs); stops each wrangler
 * (its process group) before the next. Times are wall clock on whatever machine runs it.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const PORT = 8871;
const INSPECTOR = 9371;
const BASE = `http://127.0.0.1:${PORT}`;

const argv = process.argv.slice(2);
let runs = 5;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--runs") runs = Number(argv[++i]);
  else {
    process.stderr.write(`unexpected argument ${String(argv[i])} (options: --runs N)\n`);
    process.exit(1);
  }
}
if (!(Number.isSafeInteger(runs) && runs >= 1)) {
  process.stderr.write("--runs must be a positive integer\n");
  process.exit(1);
}

spawnSync("node", ["scripts/dev-secrets.ts"], { stdio: "inherit" });
const token = spawnSync("node", ["scripts/token.ts", "--tenant", "bench", "--role", "client"], {
  encoding: "utf8",
}).stdout.trim();
if (token === "") {
  process.stderr.write("npm run token printed no token\n");
  process.exit(1);
}
const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll until `request` answers with status `ok`; returns when it did. */
async function until(request: () => Promise<Response>, ok: number, deadline: number): Promise<void> {
  for (;;) {
    if (performance.now() > deadline) throw new Error("timed out");
    try {
      const response = await request();
      await response.arrayBuffer();
      if (response.status === ok) return;
    } catch {
      // not listening yet
    }
    await sleep(25);
  }
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.pid === undefined) return resolve();
    child.once("exit", () => resolve());
    process.kill(-child.pid, "SIGTERM");
    setTimeout(() => {
      if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    }, 5_000).unref();
  });
}

interface Run {
  ready: number;
  health: number;
  session: number;
  answer: number;
}

async function once(n: number): Promise<Run> {
  const state = mkdtempSync(join(tmpdir(), "pico-coldstart-"));
  const t0 = performance.now();
  const child = spawn(
    "wrangler",
    [
      "dev",
      "--local",
      "--env",
      "dev",
      "--port",
      String(PORT),
      "--inspector-port",
      String(INSPECTOR),
      "--persist-to",
      state,
    ],
    {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    },
  );
  let ready = NaN;
  let output = "";
  const watch = (chunk: Buffer): void => {
    output += chunk.toString();
    if (Number.isNaN(ready) && /Ready on/.test(output)) ready = performance.now() - t0;
  };
  child.stdout?.on("data", watch);
  child.stderr?.on("data", watch);
  try {
    const deadline = t0 + 120_000;
    await until(() => fetch(`${BASE}/health`), 200, deadline);
    const health = performance.now() - t0;
    const session = `cold-${n}`;
    await until(() => fetch(`${BASE}/v1/sessions/${session}`, { method: "PUT", headers, body: "{}" }), 201, deadline);
    const created = performance.now() - t0;
    const response = await fetch(`${BASE}/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
      method: "POST",
      headers,
      body: JSON.stringify({ input: "hello" }),
    });
    const body = (await response.json()) as { result?: { status?: string } };
    if (body.result?.status !== "done") throw new Error(`first input not answered: ${JSON.stringify(body)}`);
    return { ready, health, session: created, answer: performance.now() - t0 };
  } catch (error) {
    process.stderr.write(output);
    throw error;
  } finally {
    await stop(child);
    rmSync(state, { recursive: true, force: true });
  }
}

const median = (values: number[]): number => {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const results: Run[] = [];
const row = (label: string, r: Run): string =>
  `${label.padEnd(8)} | ${r.ready.toFixed(0).padStart(12)} | ${r.health.toFixed(0).padStart(14)} | ${r.session.toFixed(0).padStart(16)} | ${r.answer.toFixed(0).padStart(19)}`;
console.log(`\nbench:coldstart — wrangler dev --local, fresh state each run; ms from the spawn (wall clock)`);
console.log(
  `${"run".padEnd(8)} | ${"wrangler ready".padStart(12)} | ${"first /health".padStart(14)} | ${"session created".padStart(16)} | ${"first input answered".padStart(19)}`,
);
for (let n = 1; n <= runs; n++) {
  const r = await once(n);
  results.push(r);
  console.log(row(String(n), r));
}
console.log(
  row("median", {
    ready: median(results.map((r) => r.ready)),
    health: median(results.map((r) => r.health)),
    session: median(results.map((r) => r.session)),
    answer: median(results.map((r) => r.answer)),
  }),
);
