/**
 * What the drills over `wrangler dev` share (scripts/restart-drill.ts, scripts/upgrade-drill.ts): starting
 * wrangler dev in its own process group from a given checkout, stopping it with a signal as a deploy or a
 * crash does, waiting for `/health`, the Worker's JSON log lines (src/worker/log.ts), tokens and webhook
 * secrets from scripts/token.ts and scripts/webhook-secret.ts, and the transcript's wire shapes.
 * Run by Node directly (type stripping); it imports nothing from src/.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

export class DrillFailure extends Error {}

export function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new DrillFailure(message);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface Dev {
  readonly child: ChildProcess;
  log: string;
  exited: boolean;
  readonly exit: Promise<void>;
}

export interface DevOptions {
  /** The checkout whose wrangler.toml, sources and node_modules run. */
  readonly root: string;
  readonly port: number;
  readonly inspector: number;
  readonly persist: string;
  readonly envFile: string;
  /** `--env NAME` (the development environment), or none for a config whose top level is development. */
  readonly env?: string;
  /** `--config FILE` (relative to `root`): another wrangler config than wrangler.toml. */
  readonly config?: string;
  /** `--var NAME:VALUE` each. */
  readonly vars?: Readonly<Record<string, string>>;
}

/** The development environment a checkout's wrangler.toml names: `dev` when it has `[env.dev]`, else its top level. */
export function devEnvOf(root: string): string | undefined {
  return /^\[env\.dev\]\s*$/m.test(readFileSync(join(root, "wrangler.toml"), "utf8")) ? "dev" : undefined;
}

export function startDev(options: DevOptions): Dev {
  const { root } = options;
  const child = spawn(
    join(root, "node_modules/.bin/wrangler"),
    [
      "dev",
      "--local",
      ...(options.config === undefined ? [] : ["--config", options.config]),
      ...(options.env === undefined ? [] : ["--env", options.env]),
      "--persist-to",
      options.persist,
      "--env-file",
      options.envFile,
      "--port",
      String(options.port),
      "--inspector-port",
      String(options.inspector),
      "--ip",
      "127.0.0.1",
      ...Object.entries(options.vars ?? {}).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group: the kill takes wrangler and workerd together, like a machine going away.
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
    log: "",
    exited: false,
    exit: new Promise((resolve) => child.on("exit", () => resolve())),
  };
  void dev.exit.then(() => (dev.exited = true));
  child.stdout?.on("data", (d: Buffer) => (dev.log += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (dev.log += d.toString()));
  return dev;
}

export function signalGroup(dev: Dev, signal: NodeJS.Signals): void {
  if (dev.child.pid === undefined) return;
  try {
    process.kill(-dev.child.pid, signal);
  } catch {
    // already gone
  }
}

/** Whether any process of the group is still alive. */
export function groupAlive(dev: Dev): boolean {
  if (dev.child.pid === undefined) return false;
  try {
    process.kill(-dev.child.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Signal the group; SIGKILL it when it outlives `graceMs`. */
export async function stopDev(
  dev: Dev,
  signal: NodeJS.Signals,
  graceMs: number,
): Promise<{ ms: number; forced: boolean }> {
  const started = Date.now();
  signalGroup(dev, signal);
  while (groupAlive(dev) && Date.now() - started < graceMs) await sleep(50);
  const forced = groupAlive(dev);
  if (forced) signalGroup(dev, "SIGKILL");
  while (groupAlive(dev)) await sleep(50);
  return { ms: Date.now() - started, forced };
}

export async function waitHealthy(dev: Dev, base: string, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline && !dev.exited) {
    try {
      if ((await fetch(`${base}/health`)).ok) return;
    } catch {
      // not up yet
    }
    await sleep(250);
  }
  throw new DrillFailure(`${base}/health did not come up${dev.exited ? " (wrangler dev exited)" : ""}`);
}

/** The Worker's JSON log lines (src/worker/log.ts) in wrangler dev's output. */
export interface LogLine {
  readonly type: string;
  readonly kind?: string;
  readonly method?: string;
  readonly session?: string;
  readonly durationMs?: number;
}
export function logLines(dev: Dev): LogLine[] {
  const out: LogLine[] = [];
  for (const line of dev.log.split("\n")) {
    const start = line.indexOf('{"type":');
    if (start < 0) continue;
    try {
      out.push(JSON.parse(line.slice(start)) as { type: string });
    } catch {
      // not one of ours
    }
  }
  return out;
}

/** Run scripts/{name} of `root` (token.ts, webhook-secret.ts) with the drill's secrets; its trimmed stdout. */
export function runScript(root: string, name: string, args: readonly string[], env: Record<string, string>): string {
  return execFileSync(process.execPath, [join(root, "scripts", name), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    encoding: "utf8",
  }).trim();
}

export interface ContentBlock {
  readonly type: string;
  readonly text?: string;
}
export interface Entry {
  readonly id: number;
  readonly kind: string;
  readonly model?: readonly {
    readonly role: string;
    readonly content?: string | readonly ContentBlock[];
    readonly stopReason?: string;
  }[];
}
export type InputResult =
  | { readonly status: "queued" | "placed" }
  | { readonly status: "done"; readonly answer?: number; readonly entry: number }
  | { readonly status: "unanswered"; readonly reason: string; readonly detail?: string };

export function textOf(entry: Entry): string {
  const message = entry.model?.[0];
  if (message === undefined) return "";
  if (typeof message.content === "string") return message.content;
  return (message.content ?? []).map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("");
}

/** Read a response's JSON, failing the drill (with its status and body) unless the status is expected. */
export async function expectJson<T>(
  response: Response,
  expected: number | readonly number[],
  what: string,
): Promise<T> {
  const text = await response.text();
  check(
    typeof expected === "number" ? response.status === expected : expected.includes(response.status),
    `${what}: ${response.status} ${text}`,
  );
  return (text === "" ? undefined : JSON.parse(text)) as T;
}

export function git(cwd: string, args: readonly string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

/** Milliseconds as seconds with one decimal. */
export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The previous release: a worktree at `.ci/upgrade-from` with its own `npm ci`. */
export interface PreviousRelease {
  readonly commit: string;
  readonly tree: string;
  /** Made by this run (removed after it), or given with --previous. */
  readonly own: boolean;
}

export function previousRelease(root: string, dir: string, note: (line: string) => void): PreviousRelease {
  const named = readFileSync(join(root, ".ci/upgrade-from"), "utf8").trim();
  let commit: string;
  try {
    commit = git(root, ["rev-parse", "--verify", "--quiet", `${named}^{commit}`]);
  } catch {
    throw new DrillFailure(
      `.ci/upgrade-from names ${named}, which is not a commit of this clone (fetch it: git fetch origin ${named})`,
    );
  }
  // --previous DIR: a worktree already built at that commit (to run the drill again without the build).
  const given = process.argv.indexOf("--previous");
  if (given >= 0) {
    const tree = process.argv[given + 1] ?? "";
    check(git(tree, ["rev-parse", "HEAD"]) === commit, `--previous ${tree} is not at ${commit}`);
    note(`previous release ${commit.slice(0, 7)} (.ci/upgrade-from): the worktree at --previous`);
    return { commit, tree, own: false };
  }
  const tree = join(dir, "previous");
  git(root, ["worktree", "add", "--detach", tree, commit]);
  const started = Date.now();
  try {
    execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: tree, stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    const e = error as { stderr?: Buffer };
    throw new DrillFailure(`npm ci of the previous release failed: ${e.stderr?.toString().slice(-2000) ?? ""}`);
  }
  note(
    `previous release ${commit.slice(0, 7)} (.ci/upgrade-from): worktree and npm ci ${seconds(Date.now() - started)}`,
  );
  return { commit, tree, own: true };
}

/**
 * Delete `dir` (a drill's state and the previous release's worktree inside it) after this process ends, then let
 * git forget the worktree: a detached `rm -rf`, so the drill's time is not the minute a busy disk takes.
 */
export function removeInBackground(root: string, dir: string): void {
  spawn("sh", ["-c", 'rm -rf "$1"; git -C "$2" worktree prune', "sh", dir, root], {
    detached: true,
    stdio: "ignore",
  }).unref();
}
