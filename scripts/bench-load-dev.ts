/**
 * What `npm run bench:load` (scripts/bench-load.ts) shares between its runs: a `wrangler dev --local` on a
 * free port with a fresh persisted directory and its own JWT secret, tokens, one API call with retries on a
 * connection reset, percentiles, and the CPU time of the workerd process that runs the Worker under test.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sign } from "hono/jwt";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const JWT_SECRET = "bench-load-only-jwt-secret-0123456789";

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Ports handed out already: a port just closed may be handed out again. */
const handedOut = new Set<number>();

/**
 * BENCH_PORTS=8820-8829 keeps every port the bench chooses (wrangler dev's own and its inspector's) in that range,
 * for a machine where others hold ports of their own; without it the system picks any free port.
 */
const range = ((): [number, number] | undefined => {
  const match = /^(\d+)-(\d+)$/.exec(process.env["BENCH_PORTS"] ?? "");
  return match === null ? undefined : [Number(match[1]), Number(match[2])];
})();

export async function freePort(): Promise<number> {
  if (range !== undefined) {
    for (let port = range[0]; port <= range[1]; port++) {
      if (!handedOut.has(port) && (await canListen(port))) {
        handedOut.add(port);
        return port;
      }
    }
    // Every port of the range handed out once: hand them out again, still only those free now.
    handedOut.clear();
    for (let port = range[0]; port <= range[1]; port++) {
      if (await canListen(port)) {
        handedOut.add(port);
        return port;
      }
    }
    throw new Error(`no free port in BENCH_PORTS ${range[0]}-${range[1]}`);
  }
  for (;;) {
    const port = await anyPort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function anyPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface Dev {
  readonly child: ChildProcess;
  readonly base: string;
  readonly port: number;
  /** wrangler dev's --inspector-port (the Worker's DevTools protocol: bench-load-profile.ts). */
  readonly inspector: number;
  /** The --persist-to directory (under `dir`). */
  readonly persist: string;
  readonly dir: string;
  /** How long wrangler dev took to answer /health. */
  upMs: number;
  tail: string;
  /** wrangler dev's whole output (errors the Worker reported among it), kept after the run in the temp directory. */
  readonly log: string;
  exited: boolean;
}

/**
 * Starts `wrangler dev --local` (pico-edge's wrangler.toml, or `config`) and waits until /health answers.
 * The env file gives it JWT_SECRET (and a webhook master secret); LOG_LEVEL quiet writes no request log.
 */
export async function startDev(config?: string, extra: readonly string[] = []): Promise<Dev> {
  // Another process may take a free port between its choice and wrangler's listen: try again on new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDevOnce(config, extra);
    } catch (error) {
      if (attempt >= 3 || !(error instanceof Error) || !error.message.includes("Address already in use")) throw error;
      process.stderr.write(`wrangler dev: address already in use, again on other ports\n`);
    }
  }
}

async function startDevOnce(config: string | undefined, extra: readonly string[]): Promise<Dev> {
  const dir = mkdtempSync(join(tmpdir(), "pico-bench-load-"));
  const envFile = join(dir, "bench.env");
  writeFileSync(
    envFile,
    [
      `JWT_SECRET=${JWT_SECRET}`,
      "WEBHOOK_MASTER_SECRET=bench-load-only-webhook-master-secret",
      "SUBJECT_HASH_KEY=bench-load-only-subject-hash-key-0123456789",
      "",
    ].join("\n"),
  );
  const port = await freePort();
  const inspector = await freePort();
  const persist = join(dir, "state");
  const started = Date.now();
  const child = spawn(
    join(root, "node_modules/.bin/wrangler"),
    [
      "dev",
      ...(config === undefined ? ["--env", "dev"] : ["--config", config]),
      "--local",
      "--persist-to",
      persist,
      "--env-file",
      envFile,
      "--port",
      String(port),
      "--inspector-port",
      String(inspector),
      "--ip",
      "127.0.0.1",
      "--var",
      "LOG_LEVEL:quiet",
      ...extra,
    ],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      env: {
        ...process.env,
        PATH: `${join(root, "node_modules/.bin")}:${process.env["PATH"] ?? ""}`,
        WRANGLER_SEND_METRICS: "false",
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
      },
    },
  );
  const dev: Dev = {
    child,
    base: `http://127.0.0.1:${port}`,
    port,
    inspector,
    persist,
    dir,
    upMs: 0,
    tail: "",
    log: `${dir}.log`,
    exited: false,
  };
  const keep = (d: Buffer): void => {
    dev.tail = (dev.tail + d.toString()).slice(-8_000);
    appendFileSync(dev.log, d);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.on("exit", () => (dev.exited = true));
  try {
    while (!dev.exited) {
      try {
        if ((await fetch(`${dev.base}/health`)).ok) break;
      } catch {
        // not up yet
      }
      if (Date.now() - started > 180_000) throw new Error("wrangler dev did not come up in 180 s");
      await sleep(250);
    }
    if (dev.exited) throw new Error(`wrangler dev exited:\n${dev.tail}`);
  } catch (error) {
    await stopDev(dev);
    throw error;
  }
  dev.upMs = Date.now() - started;
  return dev;
}

export async function stopDev(dev: Dev): Promise<void> {
  const pid = dev.child.pid;
  const alive = (): boolean => {
    try {
      if (pid !== undefined) process.kill(-pid, 0);
      return pid !== undefined;
    } catch {
      return false;
    }
  };
  try {
    if (pid !== undefined) process.kill(-pid, "SIGTERM");
    const started = Date.now();
    while (alive() && Date.now() - started < 10_000) await sleep(100);
    if (alive() && pid !== undefined) process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
  rmSync(dev.dir, { recursive: true, force: true });
}

export async function token(tenant: string, claims: Record<string, unknown>): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return sign({ tenant, iat: now, exp: now + 3600, ...claims }, JWT_SECRET, "HS256");
}

export interface Answer {
  readonly status: number;
  readonly json: Record<string, unknown>;
  readonly headers: Headers;
}

export async function api(
  base: string,
  method: string,
  path: string,
  jwt: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${jwt}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return {
        status: response.status,
        json: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>),
        headers: response.headers,
      };
    } catch (error) {
      // A connection reset under load: the same request again (inputs carry an Idempotency-Key).
      if (attempt >= 3) throw error;
      await sleep(200 * (attempt + 1));
    }
  }
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

// CPU time of the workerd runtime ---------------------------------------------------------------------

/** Clock ticks per second of /proc/<pid>/stat's times (`getconf CLK_TCK`; 100 on Linux). */
export const CLK_TCK = ((): number => {
  try {
    const value = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    return Number.isSafeInteger(value) && value > 0 ? value : 100;
  } catch {
    return 100;
  }
})();

interface Stat {
  readonly pid: number;
  readonly comm: string;
  readonly ppid: number;
  /** utime + stime, in clock ticks (fields 14 and 15 of /proc/<pid>/stat). */
  readonly ticks: number;
}

function readStat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 2 (comm) is in parentheses and may hold spaces: split what follows its closing one (field 3 on).
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  const rest = text.slice(close + 2).split(" ");
  const utime = Number(rest[14 - 3]);
  const stime = Number(rest[15 - 3]);
  return { pid, comm: text.slice(open + 1, close), ppid: Number(rest[4 - 3]), ticks: utime + stime };
}

/** The workerd processes under `dev`'s wrangler (its descendants named workerd). */
function workerdUnder(rootPid: number): Stat[] {
  const stats = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => readStat(Number(name)) ?? []);
  const below = new Set([rootPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const stat of stats) {
      if (!below.has(stat.pid) && below.has(stat.ppid)) {
        below.add(stat.pid);
        grew = true;
      }
    }
  }
  return stats.filter((stat) => stat.pid !== rootPid && below.has(stat.pid) && stat.comm === "workerd");
}

function opensUnder(pid: number, dir: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith(dir);
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

export interface Runtime {
  /** The workerd process that runs the Worker and its Durable Objects. */
  readonly worker: number;
  /** wrangler dev's own proxy in front of it (another workerd), if found. */
  readonly proxy: number | undefined;
  /** How the worker's process was told apart from the proxy. */
  readonly how: string;
}

/**
 * wrangler dev runs two workerd processes: its proxy worker, listening on the public port, and the one that
 * runs the Worker and its objects, which holds the SQLite files of `--persist-to` open (call this once an
 * object exists). Failing that, the one whose entry socket is not the public port.
 */
export function findRuntime(dev: Dev): Runtime {
  const pid = dev.child.pid;
  if (pid === undefined) throw new Error("wrangler dev has no pid");
  const all = workerdUnder(pid);
  if (all.length === 0) throw new Error("no workerd process under wrangler dev");
  const cmdline = (p: number): string => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").join(" ");
    } catch {
      return "";
    }
  };
  const persisting = all.filter((s) => opensUnder(s.pid, dev.persist));
  if (persisting.length === 1 && persisting[0] !== undefined) {
    const worker = persisting[0].pid;
    return { worker, proxy: all.find((s) => s.pid !== worker)?.pid, how: "holds the persisted SQLite files open" };
  }
  const publicPort = all.filter((s) => cmdline(s.pid).includes(`:${dev.port} `));
  const others = all.filter((s) => !publicPort.includes(s));
  if (others.length === 1 && others[0] !== undefined)
    return { worker: others[0].pid, proxy: publicPort[0]?.pid, how: "its entry socket is not the public port" };
  throw new Error(`cannot tell which of workerd ${all.map((s) => s.pid).join(", ")} runs the Worker`);
}

/** utime + stime of `pid` in milliseconds. */
export function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const stat = readStat(pid);
  if (stat === undefined) throw new Error(`process ${pid} is gone`);
  return (stat.ticks * 1000) / CLK_TCK;
}
