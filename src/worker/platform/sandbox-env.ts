/**
 * The production ExecutionEnv (§8.6, docs/jobs.md): commands run in a container-backed sandbox through
 * Cloudflare's Sandbox SDK (`@cloudflare/sandbox`), addressed from the session's Durable Object. Output
 * streams through the SDK's `onOutput` callback into the job's progress bridge; the kill signal is the
 * SDK's `signal`. The FileSystem half maps to the SDK's file calls (`readFile`, `writeFile`, `exists`,
 * `listFiles`, `mkdir`, `deleteFile`); a failure becomes a FileSystemError (`not_found` when the path
 * does not exist). Enabled when the Worker has a `SANDBOX` Durable Object binding to the SDK's `Sandbox`
 * class (docs/jobs.md "Jobs on Cloudflare Sandbox"); without one a session runs jobs on the scripted fake.
 *
 * The adapter depends only on the slice of the SDK it uses (`SandboxExec`, derived from the SDK's own
 * `ISandbox` type), so tests drive it with a fake of that slice and an SDK change that breaks it breaks
 * the type check, not production. The SDK module itself is loaded on first use, so a Worker without
 * the binding never evaluates it.
 */
import type { ExecOptions as SdkExecOptions, ExecResult as SdkExecResult, ISandbox } from "@cloudflare/sandbox";
import {
  FileSystemError,
  OutputTail,
  type ExecOptions,
  type ExecResult,
  type ExecutionEnv,
  type FileInfo,
} from "../../kinds/exec-env.js";
import type { SandboxBinding } from "../env.js";

/** The part of a sandbox the adapter calls: exec for the Shell half, the file calls for the FileSystem half. */
export type SandboxExec = Pick<
  ISandbox,
  "exec" | "readFile" | "writeFile" | "exists" | "listFiles" | "mkdir" | "deleteFile"
>;

export class SandboxExecutionEnv implements ExecutionEnv {
  readonly name = "sandbox";
  readonly #sandbox: () => Promise<SandboxExec>;

  /** `sandbox`: the SDK stub (from `getSandbox`), or a function that resolves it on first use. */
  constructor(sandbox: SandboxExec | (() => Promise<SandboxExec>)) {
    this.#sandbox = typeof sandbox === "function" ? sandbox : () => Promise.resolve(sandbox);
  }

  async exec(command: string, options: ExecOptions): Promise<ExecResult> {
    options.signal?.throwIfAborted();
    const sandbox = await this.#sandbox();
    const tail = new OutputTail(options.limits);
    const sdkOptions: SdkExecOptions = {
      stream: true,
      onOutput: (_stream, data) => {
        if (options.signal?.aborted === true) return;
        tail.push(data);
        options.onUpdate?.(data);
      },
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      ...(options.env === undefined ? {} : { env: { ...options.env } }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    };
    let result: SdkExecResult;
    try {
      result = await sandbox.exec(command, sdkOptions);
    } catch (error) {
      // A kill surfaces as the signal's reason, the contract every ExecutionEnv keeps.
      if (options.signal?.aborted === true) throw options.signal.reason;
      throw error;
    }
    options.signal?.throwIfAborted();
    return tail.result(result.exitCode);
  }

  // FileSystem ------------------------------------------------------------------------------------

  async readFile(path: string): Promise<string> {
    const sandbox = await this.#sandbox();
    const result = await this.#fs(sandbox, path, () => sandbox.readFile(path, { encoding: "utf-8" }));
    return result.content;
  }

  async writeFile(path: string, content: string): Promise<void> {
    const sandbox = await this.#sandbox();
    await this.#fs(sandbox, path, () => sandbox.writeFile(path, content, { encoding: "utf-8" }));
  }

  async exists(path: string): Promise<boolean> {
    const sandbox = await this.#sandbox();
    return (await sandbox.exists(path)).exists;
  }

  async listFiles(path: string): Promise<readonly FileInfo[]> {
    const sandbox = await this.#sandbox();
    const result = await this.#fs(sandbox, path, () => sandbox.listFiles(path));
    return result.files.map((file) => ({ name: file.name, type: file.type, size: file.size }));
  }

  async mkdir(path: string, options?: { readonly recursive?: boolean }): Promise<void> {
    const sandbox = await this.#sandbox();
    await this.#fs(sandbox, path, () =>
      sandbox.mkdir(path, options?.recursive === undefined ? {} : { recursive: options.recursive }),
    );
  }

  async deleteFile(path: string): Promise<void> {
    const sandbox = await this.#sandbox();
    await this.#fs(sandbox, path, () => sandbox.deleteFile(path));
  }

  /** One SDK file call; a failure is a FileSystemError, `not_found` when nothing is at the path. */
  async #fs<T>(sandbox: SandboxExec, path: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (error) {
      const found = await sandbox.exists(path).then(
        (r) => r.exists,
        () => true,
      );
      const message = error instanceof Error ? error.message : String(error);
      throw new FileSystemError(
        found ? "failed" : "not_found",
        path,
        found ? `${path}: ${message}` : `no such file or directory: ${path}`,
        { cause: error },
      );
    }
  }
}

/** The sandbox env of one session (one sandbox per session name), or undefined without the binding. */
export function sandboxEnvFor(env: SandboxBinding, sandboxId: string): ExecutionEnv | undefined {
  const ns = env.SANDBOX;
  if (ns === undefined) return undefined;
  return new SandboxExecutionEnv(async () => {
    const sdk = await import("@cloudflare/sandbox");
    return sdk.getSandbox(ns, sandboxId);
  });
}
