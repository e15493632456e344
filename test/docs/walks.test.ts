/**
 * `npm run test:docs`: every fenced ```sh block of README.md and docs/*.md runs as written, in order, one
 * doc file at a time, against a fresh `npm start` (wrangler dev --local on port 8787, the port the docs
 * use, with a new temporary --persist-to directory, so state is empty; stopped afterwards). Node's test
 * runner, TAP output: one test per doc file, with one subtest per walk.
 *
 * The convention (walks.ts and expect.ts have it in full): `# => 201` after a command asserts its HTTP
 * status, `# => {"status":"done"}` a JSON subset of its body (ids and timestamps match anything), and
 * every other curl request must answer 2xx; placeholders are shell variables the walk sets; a walk whose
 * first line is `# offline: skip — <reason>` is reported as skipped with that reason; `npm start` in a
 * walk is the runner's server.
 *
 * Port 8787 must be free (stop your own `npm start`); the walks also use 8788 (tool endpoint), 8789 (MCP
 * endpoint), 9000 and 9001 (webhook receivers). PICO_DOCS_TIMEOUT_S bounds each doc file (default 300 s);
 * PICO_DOCS_ONLY=README.md,docs/jobs.md runs only those files; PICO_DOCS_LOGS=DIR keeps each file's walk
 * output and server log there.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it, type TestContext } from "node:test";
import { parseDoc, script, type Doc } from "./walks.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const PORT = 8787;
const INSPECTOR_PORT = PORT + 500;
const BASE = `http://127.0.0.1:${PORT}`;
const DOC_TIMEOUT_MS = Number(process.env["PICO_DOCS_TIMEOUT_S"] ?? "300") * 1000;
const START_TIMEOUT_MS = 120_000;
const ONLY = process.env["PICO_DOCS_ONLY"]?.split(",").map((s) => s.trim());
const LOGS = process.env["PICO_DOCS_LOGS"];
const PATH = `${join(ROOT, "node_modules/.bin")}:${process.env["PATH"] ?? ""}`;
const NODE = join(ROOT, "node_modules/.bin/node");

function docPaths(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`);
  return ["README.md", ...docs].filter((path) => ONLY === undefined || ONLY.includes(path));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether something accepts connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

function alive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM a process group, SIGKILL it after 5 s, and wait until it is gone. */
async function stopGroup(child: ChildProcess): Promise<void> {
  const pgid = child.pid;
  if (pgid === undefined || !alive(pgid)) return;
  try {
    process.kill(-pgid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + 5_000;
  while (alive(pgid) && Date.now() < deadline) await sleep(100);
  if (alive(pgid)) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
    while (alive(pgid)) await sleep(100);
  }
}

function tail(path: string, lines: number): string {
  if (!existsSync(path)) return "";
  return readFileSync(path, "utf8").split("\n").slice(-lines).join("\n");
}

interface Server {
  readonly child: ChildProcess;
  readonly log: string;
  readonly state: string;
}

/** `npm start` (prestart, then wrangler dev --local) with empty state on PORT; resolves once it answers. */
async function startServer(dir: string): Promise<Server> {
  if (await listening(PORT))
    throw new Error(
      `port ${PORT} is in use: stop whatever listens there (your own npm start?) before npm run test:docs`,
    );
  const state = join(dir, "state");
  const log = join(dir, "wrangler.log");
  const out = openSync(log, "w");
  const child = spawn(
    "npm",
    ["start", "--", "--port", String(PORT), "--inspector-port", String(INSPECTOR_PORT), "--persist-to", state],
    {
      cwd: ROOT,
      stdio: ["ignore", out, out],
      detached: true,
      env: { ...process.env, PATH, WRANGLER_SEND_METRICS: "false" },
    },
  );
  closeSync(out);
  let exited = false;
  child.once("exit", () => (exited = true));
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline && !exited) {
    try {
      if ((await fetch(`${BASE}/health`)).ok) return { child, log, state };
    } catch {
      // not up yet
    }
    await sleep(300);
  }
  await stopGroup(child);
  throw new Error(
    `npm start did not answer on ${BASE}/health within ${START_TIMEOUT_MS / 1000} s${exited ? " (it exited)" : ""}:\n${tail(log, 30)}`,
  );
}

interface Outcome {
  /** The number of the step begun last (0: none). */
  readonly reached: number;
  /** Failures by step number. */
  readonly failures: ReadonlyMap<number, string>;
  readonly finished: boolean;
  readonly timedOut: boolean;
  /** The last lines of the walks' output. */
  readonly log: string;
}

/** Run a doc's walks in one bash shell from the repository root; stops at the first failure. */
async function runWalks(
  doc: Doc,
  dir: string,
): Promise<{ outcome: Outcome; steps: ReturnType<typeof script>["steps"] }> {
  const walkDir = join(dir, "walk");
  const generated = script(doc, join(ROOT, "test/docs/expect.ts"), NODE);
  for (const [name, text] of generated.files) {
    mkdirSync(dirname(join(walkDir, name)), { recursive: true });
    writeFileSync(join(walkDir, name), text);
  }
  const scriptPath = join(dir, "walks.sh");
  writeFileSync(scriptPath, generated.text);
  const log = join(dir, "walks.log");
  const out = openSync(log, "w");
  const child = spawn("bash", [scriptPath], {
    cwd: ROOT,
    stdio: ["ignore", out, out],
    detached: true,
    env: { ...process.env, PATH, WALK_DIR: walkDir },
  });
  closeSync(out);
  let timedOut = false;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      timedOut = true;
      resolve();
    }, DOC_TIMEOUT_MS);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  // Whatever the walks left running in the background (endpoints, receivers, watches) goes too.
  await stopGroup(child);
  const read = (name: string): string =>
    existsSync(join(walkDir, name)) ? readFileSync(join(walkDir, name), "utf8") : "";
  const failures = new Map<number, string>();
  for (const line of read("failures").split("\n")) {
    const tab = line.indexOf("\t");
    if (tab < 0) continue;
    const n = Number(line.slice(0, tab));
    if (!failures.has(n)) failures.set(n, line.slice(tab + 1));
  }
  return {
    outcome: {
      reached: Number(read("reached").trim() || "0"),
      failures,
      finished: read("finished").trim() === "ok",
      timedOut,
      log: tail(log, 40),
    },
    steps: generated.steps,
  };
}

/** Write the files a doc's blocks name into the repository root; returns those to remove afterwards. */
function writeDocFiles(doc: Doc): string[] {
  const written: string[] = [];
  for (const file of doc.files) {
    const path = join(ROOT, file.name);
    if (existsSync(path) && readFileSync(path, "utf8") !== file.text)
      throw new Error(
        `${doc.path}:${file.line} names ${file.name}, which exists in the repository root with other content: move it away first`,
      );
    if (!existsSync(path)) {
      writeFileSync(path, file.text);
      written.push(path);
    }
  }
  return written;
}

function firstLine(text: string): string {
  const line = text.split("\n")[0] ?? "";
  return line.length > 100 ? `${line.slice(0, 97)}...` : line;
}

async function runDoc(t: TestContext, path: string): Promise<void> {
  const doc = parseDoc(path, readFileSync(join(ROOT, path), "utf8"));
  if (doc.walks.length === 0) {
    t.diagnostic("no ```sh walks");
    return;
  }
  const runnable = doc.walks.some((w) => w.skip === undefined);
  let outcome: Outcome | undefined;
  let steps: ReturnType<typeof script>["steps"] = [];
  let serverLog = "";
  if (runnable) {
    const dir = mkdtempSync(join(tmpdir(), "pico-doc-walks-"));
    const written: string[] = [];
    let server: Server | undefined;
    try {
      written.push(...writeDocFiles(doc));
      server = await startServer(dir);
      const run = await runWalks(doc, dir);
      outcome = run.outcome;
      steps = run.steps;
    } finally {
      if (server !== undefined) {
        await stopGroup(server.child);
        serverLog = tail(server.log, 25);
      }
      for (const file of written) rmSync(file, { force: true });
      if (LOGS !== undefined) {
        mkdirSync(LOGS, { recursive: true });
        for (const name of ["walks.log", "wrangler.log"]) {
          if (existsSync(join(dir, name)))
            copyFileSync(join(dir, name), join(LOGS, `${path.replaceAll("/", "_")}.${name}`));
        }
      }
      rmSync(dir, { recursive: true, force: true });
    }
    while (await listening(PORT)) await sleep(200);
  }
  let failedWalk: number | undefined;
  for (const [w, walk] of doc.walks.entries()) {
    const name = `walk ${w + 1} (line ${walk.line})`;
    if (walk.skip !== undefined) {
      await t.test(name, (st) => st.skip(walk.skip));
      continue;
    }
    if (failedWalk !== undefined) {
      await t.test(name, (st) => st.skip(`not run: walk ${failedWalk === undefined ? "?" : failedWalk + 1} failed`));
      continue;
    }
    const run = outcome;
    if (run === undefined) throw new Error("the walks did not run");
    const numbers = steps.flatMap((s, i) => (s.walk === w ? [i + 1] : []));
    const last = numbers.at(-1) ?? 0;
    const failed = numbers.find((n) => run.failures.has(n));
    const complete = run.finished || (run.reached > last && failed === undefined);
    await t.test(name, () => {
      if (failed !== undefined || !complete) {
        failedWalk = w;
        const n = failed ?? run.reached;
        const step = steps[n - 1]?.step;
        const where = step === undefined ? `${path}:${walk.line}` : `${path}:${step.line} \`${firstLine(step.text)}\``;
        const why =
          failed !== undefined
            ? run.failures.get(failed)
            : run.timedOut
              ? `still running after ${DOC_TIMEOUT_MS / 1000} s`
              : "the walk stopped here";
        throw new Error(
          `${where}: ${why}\n--- the walk's output (last lines) ---\n${run.log}\n--- npm start (last lines) ---\n${serverLog}`,
        );
      }
    });
  }
}

void describe("Every doc walk runs as written", () => {
  for (const path of docPaths()) {
    void it(path, async (t) => runDoc(t, path));
  }
});

// The server's console bundle and .dev.vars come from npm start's prestart, run by each start; nothing
// else to prepare. Fail early, with a clear message, when bash or curl is missing.
for (const tool of ["bash", "curl"]) {
  if (spawnSync(tool, ["--version"], { stdio: "ignore" }).status !== 0)
    throw new Error(`test:docs needs ${tool} on the PATH`);
}
