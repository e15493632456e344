/**
 * The scripted fake ExecutionEnv (§8.6, §10.2 "fake processes and clocks", DESIGN.md §5): a tiny command
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
 */
import type { Clock } from "../core/host.js";
import { OutputTail, type ExecOptions, type ExecResult, type ExecutionEnv } from "./exec-env.js";

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
}

export class FakeExecutionEnv implements ExecutionEnv {
  readonly name = "fake";
  /** Every command started, in order (a rerun appears twice). */
  readonly started: string[] = [];
  readonly #clock: Clock;
  readonly #scripts: Map<string, Script>;

  constructor(options: FakeEnvOptions) {
    this.#clock = options.clock;
    this.#scripts = new Map(Object.entries(options.scripts ?? {}));
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
