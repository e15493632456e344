import type { ExecResult, ShellOutputLimits } from "../core/env.js";

/**
 * ExecutionEnv (§5.2 `runtime.env`, §8.6, docs/jobs.md): how the job kind runs a command. The interface
 * (FileSystem & Shell) is core's (src/core/env.ts), re-exported here with the output tail both
 * implementations share. A Worker has
 * no shell, so the host supplies one of two implementations: the scripted fake (src/kinds/exec-fake.ts:
 * tests, demos, `npm start`) or the adapter over Cloudflare's Sandbox SDK (src/worker/platform/sandbox-env.ts).
 *
 * `exec` streams output through `onUpdate` as it arrives (the job's progress bridge writes it to scratch,
 * so a watcher sees it live), observes `signal` (the process is killed and exec rejects with the
 * signal's reason), and returns when the process exits. It keeps only a bounded tail of the output
 * (`limits.maxChars`) in its result, with totals over everything the process wrote.
 */

export type {
  ExecOptions,
  ExecResult,
  ExecutionEnv,
  FileInfo,
  FileSystem,
  FileSystemErrorCode,
  Shell,
  ShellOutputLimits,
  ShellOutputMetadata,
} from "../core/env.js";
export { FileSystemError, noExecutionEnv } from "../core/env.js";

export const DEFAULT_EXEC_MAX_CHARS = 50_000;

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
