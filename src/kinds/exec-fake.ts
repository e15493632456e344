/**
 * The scripted fake ExecutionEnv (§8.6, §10.2 "fake processes and clocks", docs/jobs.md): a tiny command
 * language whose processes print, sleep on an injectable clock and exit with a code. Tests use it to
 * drive the job kind deterministically; `npm start` uses it so a live job can be watched offline
 * (`/call job {"cmd":"demo count 5"}`).
 *
 * A command is `;`-separated steps:
 *
 *   echo TEXT...          print TEXT and a newline
 *   print TEXT...         print TEXT without a newline
 *   repeat N TEXT         print TEXT and a newline N times (large output)
 *   sleep MS              sleep MS on the clock
 *   demo count N [MS]     print 1..N, one line every MS (default 1,000) ms
 *   exit CODE             stop with CODE (default: 0 after the last step)
 *
 * Scripts registered by name (`scripts`) run instead when the first word matches, for tests that need
 * a gate or a hand-made process. Every start is recorded in `started`, so a test can count reruns.
 *
 * Its FileSystem half is an in-memory tree of text files under `/` with `/workspace` (the working
 * directory relative paths resolve against) created empty; `files` seeds it.
 */
import type { Clock } from "../core/host.js";
import {
  FileSystemError,
  OutputTail,
  type ExecOptions,
  type ExecResult,
  type ExecutionEnv,
  type FileInfo,
} from "./exec-env.js";

/** What a script gets: print, sleep on the clock (observing the kill signal), its arguments. */
export interface ScriptIo {
  readonly args: readonly string[];
  readonly signal: AbortSignal | undefined;
  print(text: string): void;
  sleep(ms: number): Promise<void>;
}

/** A hand-made process: resolves with its exit code. */
export type Script = (io: ScriptIo) => Promise<number>;

export interface FakeEnvOptions {
  readonly clock: Clock;
  readonly scripts?: Readonly<Record<string, Script>>;
  /** Files to start with, by path (their directories are created). */
  readonly files?: Readonly<Record<string, string>>;
}

/** The working directory of the fake (and the Sandbox SDK's default). */
export const FAKE_WORKDIR = "/workspace";

export class FakeExecutionEnv implements ExecutionEnv {
  readonly name = "fake";
  /** Every command started, in order (a rerun appears twice). */
  readonly started: string[] = [];
  readonly #clock: Clock;
  readonly #scripts: Map<string, Script>;

  /** The file tree: a path is a file (its text) or a directory (null). */
  readonly #tree = new Map<string, string | null>([["/", null]]);

  constructor(options: FakeEnvOptions) {
    this.#clock = options.clock;
    this.#scripts = new Map(Object.entries(options.scripts ?? {}));
    this.#mkdirs(FAKE_WORKDIR);
    for (const [path, content] of Object.entries(options.files ?? {})) {
      const at = resolvePath(path);
      this.#mkdirs(parentOf(at));
      this.#tree.set(at, content);
    }
  }

  // FileSystem -----------------------------------------------------------------------------------

  async readFile(path: string): Promise<string> {
    const at = resolvePath(path);
    const node = this.#tree.get(at);
    if (node === undefined) throw new FileSystemError("not_found", at, `no such file: ${at}`);
    if (node === null) throw new FileSystemError("not_a_file", at, `${at} is a directory`);
    return node;
  }

  async writeFile(path: string, content: string): Promise<void> {
    const at = resolvePath(path);
    const dir = parentOf(at);
    if (this.#tree.get(dir) !== null)
      throw new FileSystemError(
        this.#tree.has(dir) ? "not_a_directory" : "not_found",
        dir,
        `no such directory: ${dir}`,
      );
    if (this.#tree.get(at) === null) throw new FileSystemError("not_a_file", at, `${at} is a directory`);
    this.#tree.set(at, content);
  }

  async exists(path: string): Promise<boolean> {
    return this.#tree.has(resolvePath(path));
  }

  async listFiles(path: string): Promise<readonly FileInfo[]> {
    const at = resolvePath(path);
    const node = this.#tree.get(at);
    if (node === undefined) throw new FileSystemError("not_found", at, `no such directory: ${at}`);
    if (node !== null) throw new FileSystemError("not_a_directory", at, `${at} is a file`);
    const prefix = at === "/" ? "/" : `${at}/`;
    const entries: FileInfo[] = [];
    for (const [other, content] of this.#tree) {
      if (!other.startsWith(prefix) || other === at || other.slice(prefix.length).includes("/")) continue;
      entries.push({
        name: other.slice(prefix.length),
        type: content === null ? "directory" : "file",
        size: content === null ? 0 : new TextEncoder().encode(content).length,
      });
    }
    return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async mkdir(path: string, options?: { readonly recursive?: boolean }): Promise<void> {
    const at = resolvePath(path);
    if (options?.recursive === true) {
      this.#mkdirs(at);
      return;
    }
    const dir = parentOf(at);
    if (this.#tree.get(dir) !== null) throw new FileSystemError("not_found", dir, `no such directory: ${dir}`);
    if (this.#tree.has(at))
      throw new FileSystemError(this.#tree.get(at) === null ? "failed" : "not_a_directory", at, `${at} exists`);
    this.#tree.set(at, null);
  }

  async deleteFile(path: string): Promise<void> {
    const at = resolvePath(path);
    const node = this.#tree.get(at);
    if (node === undefined) throw new FileSystemError("not_found", at, `no such file: ${at}`);
    if (node === null) throw new FileSystemError("not_a_file", at, `${at} is a directory`);
    this.#tree.delete(at);
  }

  #mkdirs(path: string): void {
    const parts = path.split("/").filter((p) => p !== "");
    let at = "";
    for (const part of parts) {
      at = `${at}/${part}`;
      const node = this.#tree.get(at);
      if (node === undefined) this.#tree.set(at, null);
      else if (node !== null) throw new FileSystemError("not_a_directory", at, `${at} is a file`);
    }
  }

  /** Register (or replace) a script. */
  script(name: string, script: Script): void {
    this.#scripts.set(name, script);
  }

  async exec(command: string, options: ExecOptions): Promise<ExecResult> {
    this.started.push(command);
    const tail = new OutputTail(options.limits);
    const signal = options.signal;
    const io: Omit<ScriptIo, "args"> = {
      signal,
      print: (text) => {
        if (text === "") return;
        // A killed process prints nothing more.
        if (signal?.aborted === true) return;
        tail.push(text);
        options.onUpdate?.(text);
      },
      sleep: (ms) => this.#clock.sleep(this.#clock.now() + ms, signal),
    };
    signal?.throwIfAborted();
    const words = command.trim().split(/\s+/);
    const script = this.#scripts.get(words[0] ?? "");
    const running = script !== undefined ? script({ ...io, args: words.slice(1) }) : runSteps(command, io);
    // The kill: exec rejects with the signal's reason as soon as it fires, whatever the script awaits.
    const code = await killable(running, signal);
    signal?.throwIfAborted();
    return tail.result(code);
  }
}

function killable(process: Promise<number>, signal: AbortSignal | undefined): Promise<number> {
  if (signal === undefined) return process;
  return new Promise<number>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    process.then(
      (code) => {
        signal.removeEventListener("abort", onAbort);
        resolve(code);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

async function runSteps(command: string, io: Omit<ScriptIo, "args">): Promise<number> {
  for (const raw of command.split(";")) {
    const step = raw.trim();
    if (step === "") continue;
    const [name = "", ...args] = step.split(/\s+/);
    switch (name) {
      case "echo":
        io.print(`${args.join(" ")}\n`);
        break;
      case "print":
        io.print(args.join(" "));
        break;
      case "repeat": {
        const n = count(args[0]);
        const line = `${args.slice(1).join(" ")}\n`;
        for (let i = 0; i < n; i++) io.print(line);
        break;
      }
      case "sleep":
        await io.sleep(count(args[0]));
        break;
      case "demo": {
        if (args[0] !== "count") return unknown(io, step);
        const n = count(args[1]);
        const every = args[2] === undefined ? 1000 : count(args[2]);
        for (let i = 1; i <= n; i++) {
          if (i > 1) await io.sleep(every);
          io.print(`${i}\n`);
        }
        break;
      }
      case "exit":
        return args[0] === undefined ? 0 : count(args[0]);
      default:
        return unknown(io, step);
    }
  }
  return 0;
}

function unknown(io: Omit<ScriptIo, "args">, step: string): number {
  io.print(`fake: command not found: ${step}\n`);
  return 127;
}

function count(word: string | undefined): number {
  const n = Number(word);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

/** An absolute, normalized path: relative ones resolve against the working directory. */
export function resolvePath(path: string): string {
  const parts: string[] = [];
  for (const part of (path.startsWith("/") ? path : `${FAKE_WORKDIR}/${path}`).split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}
