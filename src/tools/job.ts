/**
 * The built-in `job` tool (§8.3 "Blocking budget", §8.6): start a command as a background job and wait
 * for it within the call's blocking budget; past the budget the call settles with the output so far and
 * delegates (the job runs on, and a notice entry reports its end). Also status, output, wait and stop
 * of a job by id.
 *
 *   { "cmd": "npm test" }                              start (the default command when cmd is given)
 *   { "command": "start", "cmd": "...", "background": true }   start detached: return at once
 *   { "command": "status" | "output" | "wait" | "stop", "id": 12 }
 */
import type { Call } from "../core/call.js";
import type { Tool, ToolOutput, ToolRuntime } from "../kinds/services.js";
import type { JobOutputView } from "../kinds/job.js";
import type { Id, JsonValue } from "../storage/records.js";

export type JobCommand = "start" | "status" | "output" | "wait" | "stop";

export type JobParams = {
  command?: JobCommand;
  cmd?: string;
  cwd?: string;
  id?: number;
  /** start: return at once and let the job run on (aborting the call leaves it running). */
  background?: boolean;
  /** start: may a restart run the command again? (default: no, the job is reported lost) */
  rerun?: "safe";
  /** start: repeat every this many ms (at least 1,000). */
  every?: number;
};

export const jobTool: Tool<JobParams> = {
  name: "job",
  description:
    "Run a shell command as a background job. start waits for it up to the blocking budget and returns its output; a job still running then continues and you are notified when it ends. status / output / wait / stop take the job id.",
  parameters: {
    type: "object",
    properties: {
      command: {
        type: "string",
        enum: ["start", "status", "output", "wait", "stop"],
        description: "What to do (default start).",
      },
      cmd: { type: "string", description: "start: the command line." },
      cwd: { type: "string", description: "start: working directory." },
      id: { type: "integer", description: "status/output/wait/stop: the job id." },
      background: { type: "boolean", description: "start: return immediately; the job keeps running." },
      rerun: {
        type: "string",
        enum: ["safe"],
        description: "start: the command is safe to run again after a restart.",
      },
      every: { type: "integer", minimum: 1000, description: "start: repeat every this many milliseconds." },
    },
    additionalProperties: false,
  },
  replay: "never",
  async execute(_toolCallId, params, out, runtime, call) {
    const command: JobCommand = params.command ?? "start";
    switch (command) {
      case "start":
        return start(params, out, runtime, call);
      case "status":
        return report(await runtime.jobOutput(jobId(params), call), jobId(params), out, false);
      case "output":
        return report(await runtime.jobOutput(jobId(params), call), jobId(params), out, true);
      case "wait": {
        const id = jobId(params);
        const done = await runtime.waitForTask(id, { budgetMs: runtime.budgetMs }, call);
        report(await runtime.jobOutput(id, call), id, out, true);
        if (!done)
          out.diag(
            "info",
            `job ${id} is still running after the blocking budget; use job wait / status / stop`,
            "budget",
          );
        return;
      }
      case "stop": {
        const id = jobId(params);
        // The id must name a job (not found otherwise); then one atomic mark-if-live (§6.3): a job that
        // exits between the read and the mark is finished, not an error.
        await runtime.jobOutput(id, call);
        const marked = await runtime.markIfLive([id], call);
        if (marked.length > 0) {
          out.write(`job ${id}: stop requested`);
          out.details = { job: id, status: "stop requested" };
        } else {
          const after = await runtime.jobOutput(id, call);
          out.write(`job ${id} already finished (${after.status})`);
          out.details = { job: id, status: after.status };
        }
        return;
      }
      default: {
        const never: never = command;
        throw new Error(`unknown job command ${String(never)}`);
      }
    }
  },
};

async function start(params: JobParams, out: ToolOutput, runtime: ToolRuntime, call: Call): Promise<void> {
  if (params.cmd === undefined || params.cmd.trim() === "") throw new Error("start needs cmd");
  if (params.every !== undefined && (!Number.isSafeInteger(params.every) || params.every < 1000))
    throw new Error("every must be an integer of at least 1000 ms");
  const detach = params.background === true || params.every !== undefined;
  const id = await runtime.startJob(
    {
      cmd: params.cmd,
      ...(params.cwd === undefined ? {} : { cwd: params.cwd }),
      ...(params.rerun === undefined ? {} : { rerun: params.rerun }),
      ...(params.every === undefined ? {} : { every: params.every }),
      detach,
    },
    call,
  );
  if (detach) {
    out.write(`started job ${id}${params.every === undefined ? "" : ` (every ${params.every} ms)`}`);
    out.details = { job: id, status: "planned" };
    if (params.every === undefined) out.delegate(id);
    return;
  }
  const done = await runtime.waitForTask(id, { budgetMs: runtime.budgetMs }, call);
  const view = await runtime.jobOutput(id, call);
  report(view, id, out, true);
  if (!done) {
    out.delegate(id);
    out.diag("info", `still running as job ${id}; use job wait / status / stop`, "budget");
  } else if (view.exitCode !== undefined && view.exitCode !== 0) {
    throw new Error(
      `${view.text}${view.text.endsWith("\n") || view.text === "" ? "" : "\n"}exit code ${view.exitCode}`,
    );
  }
}

function report(view: JobOutputView, id: Id, out: ToolOutput, withText: boolean): void {
  const details: Record<string, JsonValue> = { job: id, status: view.status, totalChars: view.totalChars };
  if (view.exitCode !== undefined) details["exitCode"] = view.exitCode;
  out.details = details;
  if (withText) {
    // The retained tail, and the totals it stands for without resending the rest (§9.3 capture): the
    // harness's own truncation diagnostic reports them.
    out.replace(view.text);
    out.capture({ totalChars: view.totalChars });
  } else {
    out.replace(`job ${id}: ${view.status}${view.exitCode === undefined ? "" : ` (exit code ${view.exitCode})`}`);
  }
}

function jobId(params: JobParams): Id {
  if (params.id === undefined || !Number.isSafeInteger(params.id) || params.id <= 0)
    throw new Error("this command needs the job id");
  return params.id;
}
