/**
 * Load bench: `npm run bench:load [-- flags]`. Its default is the per-input cost against a floor
 * (docs/performance.md "Per-input cost against a floor"); `--product` runs the product scenario instead
 * (scripts/bench-load-product.ts, docs/operations.md "Load").
 *
 * Four runs, one after another in one invocation, under two `wrangler dev --local` (each on a free port, with a
 * fresh persisted directory and its own JWT secret), one for the floor and one for pico-edge:
 *
 *   floor     bench/floor/worker.ts: Hono, an HS256 JWT, one SQLite Durable Object per session that stores
 *             the input and an echo answer in one transaction (operator token);
 *   operator  pico-edge, an operator token, sessions created with the echo model;
 *   template  pico-edge, user tokens (one user per session), sessions created from a template (echo model);
 *   limits    the same with the tenant's limits set (every user 1,000,000 inputs a day: nothing is refused,
 *             every input is reserved and settled at the tenant's LimitsObject).
 *
 * pico-edge's three runs share one wrangler dev, each in a tenant of its own. Each run creates `--sessions`
 * sessions (not measured), answers `--warmup` inputs on one more session (not measured), then sends
 * `--inputs` inputs at `--concurrency`, spread round-robin over the sessions: each is POSTed with its own
 * Idempotency-Key (accept latency, 201), then the same request is sent again with `?wait=30` (200, the
 * original acceptance) until its result is final (answer latency, from the first POST). Over that measured
 * phase it reads utime + stime (/proc/<pid>/stat) of the workerd process that runs the Worker and its
 * objects (not wrangler's proxy, another workerd, shown apart) and prints CPU ms per input beside accepts/s
 * and p50/p99: CPU time, not wall time, because the machine is shared. Beside it, for where the time goes:
 * the CPU of one more ?wait request for an input already answered (200 of them, after the measured phase)
 * and of creating a session.
 *
 * Deferred work: what a run leaves for later (a session's usage-report backstop alarm a minute on, which wakes it;
 * a limits shard's idle give-back and forwards) would otherwise land in the next run's figures. After its checks
 * each run waits, sending nothing, until DRAIN_MS after its measured phase, and prints the Worker's CPU over that
 * wait per input ("deferred") and the ratio to the floor with it counted (--no-drain skips the wait).
 *
 * Checks, after the measured phase: every input accepted once and answered `done`; every session holds each of
 * its inputs exactly once (pico-edge: its transcript's user entries; the floor: its rows, each with one
 * answer); with limits, GET /v1/usage meters exactly the inputs sent per user. Prints the table, the load
 * average, the commit, and PASS or FAIL (exit 1).
 *
 * Flags: --sessions 50 --inputs 1000 --concurrency 16 --warmup 20 --rounds 1 (more: the runs again, in order,
 * each round in new tenants with both Workers kept up; the table shows medians and each round's CPU);
 * --floor runs only the floor; --only floor,bare,operator,template,limits picks runs (`bare`, not run by default: the
 * floor Worker served by a bare fetch handler instead of Hono, under a wrangler dev of its own); --profile samples the Worker's isolate
 * over each measured phase through wrangler dev's inspector and prints where its time went (bench-load-profile.ts). Offline; run by Node directly (type stripping), importing
 * nothing from src/. Takes about six minutes a round on two cores.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  api,
  CLK_TCK,
  cpuMs,
  findRuntime,
  percentile,
  root,
  startDev,
  stopDev,
  token,
  type Dev,
  type Runtime,
} from "./bench-load-dev.ts";
import { flags } from "./dev-secrets.ts";
import { product } from "./bench-load-product.ts";
import { startProfile, summarize, type Profiling } from "./bench-load-profile.ts";

const SWITCHES = ["floor", "product", "profile", "no-drain"];
/** How long after its measured phase a run's deferred work is counted: the session meter's one-minute backstop, and 5 s. */
const DRAIN_MS = 65_000;
const argv = process.argv.slice(2);
const switches = new Set(argv.filter((arg) => SWITCHES.includes(arg.slice(2))).map((arg) => arg.slice(2)));
const args = flags(argv.filter((arg) => !SWITCHES.includes(arg.slice(2))));

const RUNS = ["floor", "bare", "operator", "template", "limits"] as const;
type RunName = (typeof RUNS)[number];
/** The runs without --only (`bare` only when asked for). */
const DEFAULT_RUNS: readonly RunName[] = ["floor", "operator", "template", "limits"];
/** The floor's runs: the floor Worker, through Hono or (`bare`) a bare fetch handler doing the same work. */
const isFloor = (run: RunName): boolean => run === "floor" || run === "bare";
const LABELS: Record<RunName, string> = {
  floor: "floor (Hono, HS256 JWT, SQLite DO)",
  bare: "floor without Hono (bare fetch)",
  operator: "pico-edge: operator token",
  template: "pico-edge: user tokens, template",
  limits: "pico-edge: user tokens, template, limits",
};

function int(name: string, fallback: number): number {
  const value = Number(args.get(name) ?? fallback);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} is a whole number`);
  return value;
}

interface Planned {
  readonly session: number;
  readonly text: string;
  readonly key: string;
}

interface Outcome {
  readonly planned: Planned;
  readonly acceptMs: number;
  readonly answerMs: number;
  /** "done", or what went wrong. */
  readonly result: string;
  /** ?wait requests sent. */
  readonly waits: number;
}

interface Row {
  readonly run: RunName;
  readonly inputs: number;
  readonly runMs: number;
  readonly acceptsPerSecond: number;
  readonly accept: [number, number];
  readonly answer: [number, number];
  readonly workerCpuMsPerInput: number;
  /** The Worker's CPU while the run's deferred work ran (nothing sent), per input; NaN with --no-drain. */
  readonly deferredCpuMsPerInput: number;
  readonly proxyCpuMsPerInput: number;
  /** Creating a session (PUT), after the first `concurrency` of them. */
  readonly setupCpuMsPerSession: number;
  /** The ?wait request again for an input already answered (a duplicate): the cost of a request alone. */
  readonly repeatCpuMsPerRequest: number;
  /** ?wait requests per input in the measured phase (at least 1). */
  readonly waitsPerInput: number;
  readonly failures: readonly string[];
}

/** One run's tenant: how its sessions are created and who sends each session's inputs. */
interface Setup {
  readonly tenant: string;
  /** The token that sends session `i`'s inputs (and created it). */
  readonly tokenOf: (session: number) => string;
  readonly operator: string;
}

async function setUp(dev: Dev, run: RunName, round: number, sessions: number): Promise<Setup> {
  const tenant = `cost-${run}-${round}`;
  const operator = await token(tenant, { role: "operator" });
  const users = run === "template" || run === "limits";
  const tokens = users
    ? await Promise.all(
        Array.from({ length: sessions + 1 }, (_, i) => token(tenant, { role: "user", sub: `user-${i}` })),
      )
    : [];
  if (run === "limits") {
    const put = await api(dev.base, "PUT", "/v1/limits", operator, { user: { inputsPerDay: 1_000_000 } });
    if (put.status !== 200) throw new Error(`PUT /v1/limits: ${put.status} ${JSON.stringify(put.json)}`);
  }
  if (users) {
    const template = await api(dev.base, "PUT", "/v1/templates/load", operator, { model: "echo/echo" });
    if (template.status !== 200 && template.status !== 201)
      throw new Error(`PUT /v1/templates/load: ${template.status} ${JSON.stringify(template.json)}`);
  }
  const tokenOf = (session: number): string => (users ? (tokens[session] ?? "") : operator);
  return { tenant, tokenOf, operator };
}

/** Session `i` of a run (`i === sessions`: the warm-up session). */
const sessionName = (i: number): string => `cost-${i}`;

/** One input: POST it, then the same request with ?wait=30 until its result is final. */
async function send(dev: Dev, setup: Setup, planned: Planned): Promise<Outcome> {
  const path = `/v1/sessions/${sessionName(planned.session)}/conversations/root/inputs`;
  const jwt = setup.tokenOf(planned.session);
  const sent = Date.now();
  const accepted = await api(dev.base, "POST", path, jwt, { input: planned.text }, { "idempotency-key": planned.key });
  const acceptMs = Date.now() - sent;
  if (accepted.status !== 201) {
    const result = `accept answered ${accepted.status} ${JSON.stringify(accepted.json).slice(0, 200)}`;
    return { planned, acceptMs, answerMs: acceptMs, result, waits: 0 };
  }
  const inputId = Number(accepted.json["inputId"]);
  let result = "";
  let waits = 0;
  // Every input is waited for at least once, even one already answered (the floor answers at once).
  while (result !== "done" && result !== "unanswered") {
    waits += 1;
    const waited = await api(
      dev.base,
      "POST",
      `${path}?wait=30`,
      jwt,
      { input: planned.text },
      { "idempotency-key": planned.key },
    );
    if (waited.status !== 200 || waited.json["duplicate"] !== true || Number(waited.json["inputId"]) !== inputId) {
      result = `retry answered ${waited.status} ${JSON.stringify(waited.json).slice(0, 200)}`;
      break;
    }
    result = String(waited.json["status"]);
    if (result === "done" && typeof waited.json["outputText"] !== "string") result = "done without outputText";
  }
  return { planned, acceptMs, answerMs: Date.now() - sent, result, waits };
}

async function drive(dev: Dev, setup: Setup, plan: readonly Planned[], concurrency: number): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < plan.length) {
        const planned = plan[next++];
        if (planned === undefined) break;
        outcomes.push(await send(dev, setup, planned));
      }
    }),
  );
  return outcomes;
}

/** The texts stored in session `i`: for each, how many times (and, on the floor, any with other than one answer). */
async function stored(dev: Dev, run: RunName, setup: Setup, i: number): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  const jwt = setup.tokenOf(i);
  if (isFloor(run)) {
    const page = await api(dev.base, "GET", `/v1/sessions/${sessionName(i)}/inputs`, jwt);
    for (const item of (page.json["items"] as { text: string; answers: number }[] | undefined) ?? []) {
      const text = item.answers === 1 ? item.text : `${item.text} (${item.answers} answers)`;
      counts.set(text, (counts.get(text) ?? 0) + 1);
    }
    return counts;
  }
  let after = 0;
  for (;;) {
    const page = await api(
      dev.base,
      "GET",
      `/v1/sessions/${sessionName(i)}/conversations/root/entries?kind=user&limit=1000&after=${after}`,
      jwt,
    );
    const items = (page.json["items"] as { id: number; model?: { content?: unknown }[] }[] | undefined) ?? [];
    for (const entry of items) {
      const content = entry.model?.[0]?.content;
      const text =
        typeof content === "string"
          ? content
          : Array.isArray(content)
            ? content.map((b: { text?: string }) => b.text ?? "").join("")
            : "";
      counts.set(text, (counts.get(text) ?? 0) + 1);
    }
    const cursor = page.json["next"];
    if (typeof cursor !== "number") break;
    after = cursor;
  }
  return counts;
}

/** --profile: each run's profile summary, printed after the table. */
const profiles: string[] = [];

async function measure(
  dev: Dev,
  run: RunName,
  round: number,
  sessions: number,
  inputs: number,
  concurrency: number,
  warmup: number,
): Promise<Row> {
  const setup = await setUp(dev, run, round, sessions);
  const body = isFloor(run) ? {} : run === "operator" ? { model: "echo/echo" } : { template: "load" };
  let runtime: Runtime | undefined;
  let setupCpu = Number.NaN;
  let measuredSessions = 0;
  for (let i = 0; i <= sessions; i += concurrency) {
    await Promise.all(
      Array.from({ length: Math.min(concurrency, sessions + 1 - i) }, async (_, j) => {
        const created = await api(dev.base, "PUT", `/v1/sessions/${sessionName(i + j)}`, setup.tokenOf(i + j), body);
        if (created.status !== 201)
          throw new Error(`${run}: PUT ${sessionName(i + j)}: ${created.status} ${JSON.stringify(created.json)}`);
      }),
    );
    if (i === 0) {
      // An object exists now, so the runtime holds its SQLite file open.
      runtime = findRuntime(dev);
      setupCpu = cpuMs(runtime.worker);
    } else measuredSessions += Math.min(concurrency, sessions + 1 - i);
  }
  if (runtime === undefined) throw new Error("no sessions");
  setupCpu = cpuMs(runtime.worker) - setupCpu;

  const warm = await drive(
    dev,
    setup,
    Array.from({ length: warmup }, (_, n) => ({ session: sessions, text: `warm-up ${n}`, key: `warm-${n}` })),
    Math.min(concurrency, 4),
  );
  const failures: string[] = warm
    .filter((o) => o.result !== "done")
    .map((o) => `warm-up: ${o.result}`)
    .slice(0, 1);

  const plan: Planned[] = Array.from({ length: inputs }, (_, n) => {
    const session = n % sessions;
    const turn = Math.floor(n / sessions);
    return { session, text: `input ${turn} of session ${session}`, key: `s${session}-n${turn}` };
  });
  // --profile: sample the Worker's isolate over the measured phase (the sampling costs CPU: its figures are apart).
  const profiling: Profiling | undefined = switches.has("profile") ? await startProfile(dev.inspector) : undefined;
  const cpuBefore = cpuMs(runtime.worker);
  const proxyBefore = cpuMs(runtime.proxy);
  const started = Date.now();
  const outcomes = await drive(dev, setup, plan, concurrency);
  const runMs = Date.now() - started;
  const cpu = cpuMs(runtime.worker) - cpuBefore;
  const proxy = cpuMs(runtime.proxy) - proxyBefore;
  if (profiling !== undefined) {
    const path = join(tmpdir(), `pico-bench-load-${run}-${round + 1}.cpuprofile`);
    profiles.push(summarize(await profiling.stop(), path, `${run} (round ${round + 1})`));
  }
  // The same ?wait request again for inputs already answered: what one request costs without a turn.
  const repeats = plan.slice(0, Math.min(plan.length, 200));
  const repeatBefore = cpuMs(runtime.worker);
  let repeatNext = 0;
  let repeatBad = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (repeatNext < repeats.length) {
        const planned = repeats[repeatNext++];
        if (planned === undefined) break;
        const again = await api(
          dev.base,
          "POST",
          `/v1/sessions/${sessionName(planned.session)}/conversations/root/inputs?wait=30`,
          setup.tokenOf(planned.session),
          { input: planned.text },
          { "idempotency-key": planned.key },
        );
        if (again.status !== 200 || again.json["status"] !== "done") repeatBad += 1;
      }
    }),
  );
  const repeatCpu = cpuMs(runtime.worker) - repeatBefore;
  if (repeatBad > 0) failures.push(`${repeatBad} repeated requests not answered 200 done`);
  process.stderr.write(
    `${run}: workerd ${runtime.worker} (${runtime.how}), wrangler's proxy ${runtime.proxy ?? "not found"}\n`,
  );

  // Checks, not measured ----------------------------------------------------------------------------
  const bad = outcomes.filter((o) => o.result !== "done");
  if (outcomes.length !== plan.length) failures.push(`${plan.length} inputs planned, ${outcomes.length} sent`);
  if (bad.length > 0) failures.push(`${bad.length} inputs not answered done (first: ${bad[0]?.result})`);
  const wrong: string[] = [];
  for (let i = 0; i < sessions; i++) {
    const counts = await stored(dev, run, setup, i);
    const expected = plan.filter((p) => p.session === i).map((p) => p.text);
    for (const text of expected) if (counts.get(text) !== 1) wrong.push(`${text}: ${counts.get(text) ?? 0}`);
    const extra = [...counts.keys()].filter((text) => !expected.includes(text));
    wrong.push(...extra.map((text) => `unexpected ${text}`));
  }
  if (wrong.length > 0) failures.push(`${wrong.length} inputs not stored exactly once (first: ${wrong[0]})`);
  if (run === "limits") {
    // The tenant's usage is what its shards forwarded (each at most FORWARD_MS behind): read until it holds every
    // input, for at most 30 s.
    const metered = new Map<string, number>();
    for (let tries = 0; tries < 60 && (metered.get("(tenant)") ?? 0) < inputs + warmup; tries++) {
      if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 500));
      const usage = await api(dev.base, "GET", "/v1/usage", setup.operator);
      metered.clear();
      for (const day of (usage.json["items"] as { sub: string | null; inputs: number }[] | undefined) ?? [])
        metered.set(day.sub ?? "(tenant)", (metered.get(day.sub ?? "(tenant)") ?? 0) + day.inputs);
    }
    for (let i = 0; i <= sessions; i++) {
      const sent = i === sessions ? warmup : plan.filter((p) => p.session === i).length;
      if ((metered.get(`user-${i}`) ?? 0) !== sent)
        failures.push(`user-${i}: ${sent} inputs, ${metered.get(`user-${i}`) ?? 0} metered`);
    }
    if ((metered.get("(tenant)") ?? 0) !== inputs + warmup)
      failures.push(`tenant: ${inputs + warmup} inputs, ${metered.get("(tenant)") ?? 0} metered`);
  }

  // The run's deferred work, while nothing is sent (from after the checks to DRAIN_MS after the measured phase).
  let deferred = Number.NaN;
  if (!switches.has("no-drain")) {
    const before = cpuMs(runtime.worker);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + runMs + DRAIN_MS - Date.now())));
    deferred = cpuMs(runtime.worker) - before;
  }

  const acceptLatency = outcomes.map((o) => o.acceptMs);
  const answerLatency = outcomes.map((o) => o.answerMs);
  return {
    run,
    inputs: outcomes.length,
    runMs,
    acceptsPerSecond: (outcomes.length - bad.length) / (runMs / 1000),
    accept: [percentile(acceptLatency, 50), percentile(acceptLatency, 99)],
    answer: [percentile(answerLatency, 50), percentile(answerLatency, 99)],
    workerCpuMsPerInput: cpu / outcomes.length,
    deferredCpuMsPerInput: deferred / outcomes.length,
    proxyCpuMsPerInput: proxy / outcomes.length,
    setupCpuMsPerSession: setupCpu / measuredSessions,
    repeatCpuMsPerRequest: repeatCpu / repeats.length,
    waitsPerInput: outcomes.reduce((n, o) => n + o.waits, 0) / outcomes.length,
    failures: failures.map((f) => `${run}: ${f}`),
  };
}

function loadavg(): string {
  return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
}

async function cost(): Promise<void> {
  const sessions = Math.max(1, int("sessions", 50));
  const inputs = int("inputs", 1000);
  const concurrency = Math.max(1, int("concurrency", 16));
  const warmup = int("warmup", 20);
  const rounds = Math.max(1, int("rounds", 1));
  const only = switches.has("floor") ? ["floor"] : (args.get("only")?.split(",") ?? [...DEFAULT_RUNS]);
  const unknown = only.filter((name) => !(RUNS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`--only takes ${RUNS.join(",")}, not ${unknown.join(",")}`);
  const runs = RUNS.filter((name) => only.includes(name));
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim();
  } catch {
    // not a checkout
  }
  const loadBefore = loadavg();
  const rows: Row[] = [];
  const devs: string[] = [];
  // Both Workers stay up through every round (only the one measured is busy), so rounds interleave.
  let floorDev: Dev | undefined;
  let bareDev: Dev | undefined;
  let picoDev: Dev | undefined;
  let floorLog: string | undefined;
  let picoLog: string | undefined;
  try {
    if (runs.includes("floor")) {
      floorDev = await startDev(join(root, "bench/floor/wrangler.jsonc"));
      devs.push(`floor ${(floorDev.upMs / 1000).toFixed(1)} s`);
      floorLog = floorDev.log;
    }
    if (runs.includes("bare")) {
      bareDev = await startDev(join(root, "bench/floor/wrangler.jsonc"), ["--var", "FLOOR_ROUTER:bare"]);
      devs.push(`bare floor ${(bareDev.upMs / 1000).toFixed(1)} s`);
    }
    if (runs.some((name) => !isFloor(name))) {
      // --profile: unminified, so the profile names functions (minifying changes parse time only).
      picoDev = await startDev(undefined, switches.has("profile") ? ["--minify=false"] : []);
      devs.push(`pico-edge ${(picoDev.upMs / 1000).toFixed(1)} s`);
      picoLog = picoDev.log;
    }
    for (let round = 1; round <= rounds; round++) {
      for (const run of runs) {
        const dev = run === "floor" ? floorDev : run === "bare" ? bareDev : picoDev;
        if (dev === undefined) throw new Error(`no wrangler dev for ${run}`);
        rows.push(await measure(dev, run, round, sessions, inputs, concurrency, warmup));
      }
    }
  } finally {
    if (floorDev !== undefined) await stopDev(floorDev);
    if (bareDev !== undefined) await stopDev(bareDev);
    if (picoDev !== undefined) await stopDev(picoDev);
  }
  const loadAfter = loadavg();

  // One line per run: with several rounds, the median of each figure over the rounds, and each round's CPU.
  const median = (values: readonly number[]): number => {
    const sorted = [...values].sort((x, y) => x - y);
    const half = Math.floor(sorted.length / 2);
    return sorted.length % 2 === 1 ? (sorted[half] ?? Number.NaN) : ((sorted[half - 1] ?? 0) + (sorted[half] ?? 0)) / 2;
  };
  const of = (run: RunName): Row[] => rows.filter((row) => row.run === run);
  const cpuOf = (run: RunName): number => median(of(run).map((row) => row.workerCpuMsPerInput));
  const floorCpu = runs.includes("floor") ? cpuOf("floor") : undefined;
  const drained = !switches.has("no-drain");
  const withDeferredOf = (run: RunName): number =>
    median(of(run).map((row) => row.workerCpuMsPerInput + row.deferredCpuMsPerInput));
  const floorWithDeferred = runs.includes("floor") ? withDeferredOf("floor") : undefined;
  const header = [
    "run",
    "accepts/s",
    "accept p50 / p99 ms",
    "answer p50 / p99 ms",
    "workerd CPU ms/input",
    "x floor",
    ...(rounds > 1 ? ["CPU ms/input by round"] : []),
    ...(drained ? ["deferred CPU ms/input", "x floor with deferred"] : []),
    "waits/input",
    "repeat CPU ms/request",
    "PUT session CPU ms",
    "proxy CPU ms/input",
  ];
  const table = runs.map((run) => {
    const mine = of(run);
    const m = (pick: (row: Row) => number): number => median(mine.map(pick));
    const setupCpu = m((row) => row.setupCpuMsPerSession);
    return [
      LABELS[run],
      m((row) => row.acceptsPerSecond).toFixed(1),
      `${m((row) => row.accept[0])} / ${m((row) => row.accept[1])}`,
      `${m((row) => row.answer[0])} / ${m((row) => row.answer[1])}`,
      cpuOf(run).toFixed(2),
      floorCpu === undefined ? "" : (cpuOf(run) / floorCpu).toFixed(1),
      ...(rounds > 1 ? [mine.map((row) => row.workerCpuMsPerInput.toFixed(2)).join(" ")] : []),
      ...(drained
        ? [
            m((row) => row.deferredCpuMsPerInput).toFixed(2),
            floorWithDeferred === undefined ? "" : (withDeferredOf(run) / floorWithDeferred).toFixed(1),
          ]
        : []),
      m((row) => row.waitsPerInput).toFixed(2),
      m((row) => row.repeatCpuMsPerRequest).toFixed(2),
      Number.isNaN(setupCpu) ? "-" : setupCpu.toFixed(1),
      m((row) => row.proxyCpuMsPerInput).toFixed(2),
    ];
  });
  const widths = header.map((h, c) => Math.max(h.length, ...table.map((r) => (r[c] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ");
  const failures = rows.flatMap((row) => row.failures);
  process.stdout.write(
    [
      "",
      `bench:load: per-input cost against a floor (wrangler dev --local, echo model), commit ${commit}`,
      `${sessions} sessions, ${inputs} inputs, concurrency ${concurrency}, ${warmup} warm-up inputs per run (not measured); each input accepted, then waited for with ?wait=30`,
      ...(rounds > 1 ? [`${rounds} rounds, interleaved (the runs in order, then again): medians over the rounds`] : []),
      `wrangler dev up: ${devs.join(", ")}; CPU: utime + stime of the Worker's workerd process (/proc/<pid>/stat, CLK_TCK ${CLK_TCK}) over the measured phase`,
      `load average (1, 5, 15 min): ${loadBefore} before, ${loadAfter} after`,
      "",
      line(header),
      ...table.map(line),
      "",
      "workerd CPU ms/input: the Worker's workerd over the measured phase (each input's accept, its ?wait requests,",
      "  and whatever the objects did meanwhile), per input; x floor: against the floor's",
      ...(drained
        ? [
            `deferred CPU ms/input: the Worker's workerd while the run's deferred work ran, nothing sent (from its checks to`,
            `  ${DRAIN_MS / 1000} s after its measured phase: alarms, forwards), per input; x floor with deferred: both counted`,
          ]
        : []),
      "waits/input: ?wait requests per input; repeat CPU ms/request: the ?wait request again for up to 200 inputs",
      "  already answered (a duplicate: one request without a turn); PUT session CPU ms: creating one session (after",
      "  the first batch); proxy CPU ms/input: wrangler dev's own proxy workerd on the public port, not the Worker's",
      "",
      ...(profiles.length === 0
        ? []
        : [
            "--profile: the Worker's isolate sampled over each measured phase (CPU figures above include the sampling)",
            ...profiles,
            "",
          ]),
    ].join("\n"),
  );
  if (failures.length > 0) {
    const logs = [floorLog, picoLog].flatMap((log) => (log === undefined ? [] : [`  wrangler dev's output: ${log}`]));
    process.stdout.write(`FAIL\n${[...failures.map((f) => `  ${f}`), ...logs].join("\n")}\n`);
    process.exit(1);
  }
  process.stdout.write("PASS\n");
}

(switches.has("product") ? product(args) : cost()).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
