/**
 * ExecutionEnv (§5.2 `runtime.env`, §8.6, §9.3): the harness's execution environment, FileSystem & Shell.
 * Core only names the interface; a host supplies an implementation when it opens the harness
 * (`HarnessOptions.env`): the scripted fake (src/kinds/exec-fake.ts: tests, demos, `npm start`) or the
 * adapter over Cloudflare's Sandbox SDK (src/worker/platform/sandbox-env.ts). Task and tool code reach it as
 * `runtime.env`, calling its methods directly (no wrappers, §5.2); a harness opened without one has an
 * env whose every method rejects, naming what is missing.
 *
 * Shell: `exec` streams output through `onUpdate` as it arrives, observes `signal` (the process is
 * killed and exec rejects with the signal's reason), and returns when the process exits, keeping only
 * a bounded tail of the output (`limits.maxChars`) with totals over everything the process wrote.
 *
 * FileSystem: text files by path. A relative path resolves against the env's working directory
 * (`/workspace` for both implementations). Failures reject with a `FileSystemError` whose `code` says
 * what went wrong (`not_found`, `not_a_file`, `not_a_directory`, `failed`).
 */

/** The retained window of a command's text output (§9.3 ShellOutputLimits). */
export interface ShellOutputLimits {
  /** Characters of the output's tail kept in results and terminal states. */
  readonly maxChars?: number;
}

/**
 * What a tool reports about output it did not resend (§9.3 `ToolOutput.capture`): the totals the
 * retained text stands for, and where the whole output was spilled, if anywhere.
 */
export interface ShellOutputMetadata {
  /** Characters of output in all (the retained text is its tail). */
  readonly totalChars: number;
  /** Where the full output can be read (a file in the env), when it was spilled. */
  readonly spillPath?: string;
}

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

export interface Shell {
  /** A short name for diagnostics ("fake", "sandbox", "none"). */
  readonly name: string;
  exec(command: string, options: ExecOptions): Promise<ExecResult>;
}

/** One directory entry. */
export interface FileInfo {
  readonly name: string;
  readonly type: "file" | "directory" | "symlink" | "other";
  /** Bytes (files); 0 for directories. */
  readonly size: number;
}

export interface FileSystem {
  /** A text file's content. */
  readFile(path: string): Promise<string>;
  /** Create or replace a text file; its directory must exist (see `mkdir`). */
  writeFile(path: string, content: string): Promise<void>;
  /** Whether anything exists at `path`. */
  exists(path: string): Promise<boolean>;
  /** The entries of a directory, by name. */
  listFiles(path: string): Promise<readonly FileInfo[]>;
  /** Create a directory (and its parents with `recursive`). */
  mkdir(path: string, options?: { readonly recursive?: boolean }): Promise<void>;
  /** Delete a file. */
  deleteFile(path: string): Promise<void>;
}

export type ExecutionEnv = FileSystem & Shell;

export type FileSystemErrorCode = "not_found" | "not_a_file" | "not_a_directory" | "failed";

export class FileSystemError extends Error {
  constructor(
    readonly code: FileSystemErrorCode,
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "FileSystemError";
  }
}

/** The env of a harness opened without one: every method rejects, naming what is missing. */
export const noExecutionEnv: ExecutionEnv = {
  name: "none",
  exec: () => Promise.reject(missing("run commands")),
  readFile: () => Promise.reject(missing("read files")),
  writeFile: () => Promise.reject(missing("write files")),
  exists: () => Promise.reject(missing("look up files")),
  listFiles: () => Promise.reject(missing("list files")),
  mkdir: () => Promise.reject(missing("create directories")),
  deleteFile: () => Promise.reject(missing("delete files")),
};

function missing(what: string): Error {
  return new Error(`this harness has no execution environment (HarnessOptions.env), so it cannot ${what}`);
}
