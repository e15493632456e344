/**
 * ExecutionEnv (§5.2 `runtime.env`, §8.6, DESIGN.md §5): how the job kind runs a command. A Worker has
 * no shell, so the host supplies one of two implementations: the scripted fake (src/kinds/exec-fake.ts:
 * tests, demos, `npm start`) or the adapter over Cloudflare's Sandbox SDK (src/worker/sandbox-env.ts).
 *
 * `exec` streams output through `onUpdate` as it arrives (the job's progress bridge writes it to scratch,
 * so a watcher sees it live), observes `signal` (the process is killed and exec rejects with the
 * signal's reason), and returns when the process exits. It keeps only a bounded tail of the output
 * (`limits.maxChars`) in its result, with totals over everything the process wrote.
 */

/** The retained window of a command's text output (§9.3 ShellOutputLimits). */
export interface ShellOutputLimits {
  /** Characters of the output's tail kept in results and terminal states. */
  readonly maxChars?: number;
}

export const DEFAULT_EXEC_MAX_CHARS = 50_000;

export interface ExecOptions {
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  /** Aborting kills the process; exec then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called with each chunk of output (stdout and stderr interleaved, in arrival order). */
  readonly onUpdate?: (chunk: string) => void;
  readonly limits?: ShellOutputLimits;
}

export interface ExecResult {
  readonly exitCode: number;
  /** The tail of the output, at most `limits.maxChars` characters. */
  readonly output: string;
  /** Characters the process wrote in all; more than `output.length` means the output was truncated. */
  readonly totalChars: number;
}

export interface ExecutionEnv {
  /** A short name for diagnostics ("fake", "sandbox"). */
  readonly name: string;
  exec(command: string, options: ExecOptions): Promise<ExecResult>;
}

/** Keeps a bounded tail of streamed output and the total count (shared by both implementations). */
export class OutputTail {
  readonly #max: number;
  #text = "";
  #total = 0;

  constructor(limits: ShellOutputLimits | undefined) {
    this.#max = Math.max(0, limits?.maxChars ?? DEFAULT_EXEC_MAX_CHARS);
  }

  push(chunk: string): void {
    this.#total += chunk.length;
    const next = this.#text + chunk;
    this.#text = next.length > this.#max ? next.slice(next.length - this.#max) : next;
  }

  result(exitCode: number): ExecResult {
    return { exitCode, output: this.#text, totalChars: this.#total };
  }
}
