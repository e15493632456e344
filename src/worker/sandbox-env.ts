/**
 * The production ExecutionEnv (§8.6, DESIGN.md §5): commands run in a container-backed sandbox through
 * Cloudflare's Sandbox SDK (`@cloudflare/sandbox`), addressed from the session's Durable Object. Output
 * streams through the SDK's `onOutput` callback into the job's progress bridge; the kill signal is the
 * SDK's `signal`. Enabled when the Worker has a `SANDBOX` Durable Object binding to the SDK's `Sandbox`
 * class (README "Jobs on Cloudflare Sandbox"); without one a session runs jobs on the scripted fake.
 *
 * The adapter depends only on the slice of the SDK it uses (`SandboxExec`, derived from the SDK's own
 * `ISandbox` type), so tests drive it with a fake of that slice and an SDK change that breaks it breaks
 * the type check, not production. The SDK module itself is loaded on first use, so a Worker without
 * the binding never evaluates it.
 */
import type { ExecOptions as SdkExecOptions, ExecResult as SdkExecResult, ISandbox, Sandbox } from "@cloudflare/sandbox";
import { OutputTail, type ExecOptions, type ExecResult, type ExecutionEnv } from "../kinds/exec-env.js";

/** The part of a sandbox the adapter calls. */
export type SandboxExec = Pick<ISandbox, "exec">;

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
}

/** The binding a Worker configures to enable the adapter (a Durable Object namespace of `Sandbox`). */
export interface SandboxBinding {
  readonly SANDBOX?: DurableObjectNamespace<Sandbox>;
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
