/**
 * The job task kind (§8.6): a background task that runs a process through the ExecutionEnv.
 *
 *   planned { cmd, cwd, every?, notBefore? } -> running { startedAt } -> exited { output, exitCode }
 *                                                                      | killed { output } | lost
 *   roles:   planned=start; running=inflight; exited/killed/lost=terminal
 *   execute: sleep until notBefore (with the Call); { running; startedAt }; clear the previous run's
 *            scratch; env.exec with the progress bridge (the tool sink over this task's scratch, so a
 *            watcher sees output live and the retained window stays bounded); then one commit:
 *            { consume the notice request and append the notice if there was one;
 *              recurring: planned with notBefore = now + every; otherwise settle exited }
 *   recover: rerun "safe" -> run again with the fresh Call; otherwise { consume notice; settle lost }
 *   abort:   read the committed output from scratch; { consume notice; settle killed }
 *
 * A recurring job never runs a backlog: after a sleep past several intervals it runs once and records
 * the occurrences it skipped (`skipped`). Notice requests (a job whose call returned early, §8.3) are
 * sticky session values keyed by job id, never a patch of the job's state by its former owner;
 * consuming one and publishing its notice (a built-in `notice` entry with a stored SystemMessage) is one commit
 * on every terminal path. If the job is already terminal when delegation settles, the delegating
 * tool's settlement places the same notice (`delegateNotice`), so both orders notify alike.
 */
import type { SystemMessage } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { noticeEntry, noticeKind } from "../core/entries.js";
import { PicoError, TaskCancelled, isInvocationCancellation } from "../core/errors.js";
import { listHandle, valueHandle, type Harness } from "../core/harness.js";
import type { TaskRuntime } from "../core/runtime.js";
import { sessionValue, withKey } from "../core/state.js";
import { defineTaskKind, type TaskDefinition, type TypedTask } from "../core/task-kind.js";
import { conversationTx, type TxBuilder } from "../core/tx.js";
import type { Id, JsonObject, Task } from "../storage/records.js";
import { DEFAULT_EXEC_MAX_CHARS, type ExecutionEnv } from "./exec-env.js";
import { emptyFold, outputState, readSinkScratch, sinkCheckpoint, sinkOps, ToolSink, type SinkFold } from "./sink.js";
import type { JobInput, JobOutputView, JobState } from "./job-state.js";
import type { ToolOutputState } from "./states.js";

// ---------------------------------------------------------------------------------------------
// State (§8.6; the types are in job-state.ts)

export type { JobInput, JobOrigin, JobOutputView, JobState } from "./job-state.js";

/** The working directory of a job whose starter names none (the Sandbox SDK's default workspace). */
export const DEFAULT_JOB_CWD = "/workspace";

export const jobRoles = {
  planned: "start",
  running: "inflight",
  exited: "terminal",
  killed: "terminal",
  lost: "terminal",
} as const;

/** The job kind's state witness, for typed reads by name. */
export const jobDefinition: TaskDefinition<JobState, typeof jobRoles> = { kind: "job", roles: jobRoles };

type JobTask = TypedTask<JobState, typeof jobRoles>;

// ---------------------------------------------------------------------------------------------
// Notice requests (§8.3, §8.6)

/** A sticky request for a completion notice: set by the delegating tool's settlement. */
export interface NoticeRequest extends JsonObject {
  conversationId: Id;
  /** The tool call whose result said "still running as job N". */
  callId: string | null;
}

const noticeRequests = sessionValue<NoticeRequest>("pi.job.notice");

export function noticeRequest(jobId: Id) {
  return withKey(noticeRequests, String(jobId));
}

/** The terminal facts a notice reports. */
export type JobOutcome =
  | { status: "exited"; exitCode: number; output: ToolOutputState }
  | { status: "killed"; output: ToolOutputState }
  | { status: "lost" };

const NOTICE_TAIL_CHARS = 2000;

/** The notice entry: a built-in `notice` entry with a stored SystemMessage the next generation reads (§2.1, §8.6). */
export function appendNotice(
  b: TxBuilder,
  conversationId: Id,
  jobId: Id,
  cmd: string,
  outcome: JobOutcome,
  now: number,
): Id {
  const what =
    outcome.status === "exited"
      ? `exited with code ${outcome.exitCode}`
      : outcome.status === "killed"
        ? "was killed"
        : "was lost in a restart (it was not safe to run again)";
  const text = outcome.status === "lost" ? "" : outputText(outcome.output);
  const tail = text.length > NOTICE_TAIL_CHARS ? text.slice(text.length - NOTICE_TAIL_CHARS) : text;
  const body =
    `Job ${jobId} (${cmd}) ${what}.` + (tail === "" ? "" : `\nOutput (last ${tail.length} characters):\n${tail}`);
  const message: SystemMessage = { role: "system", content: body, timestamp: now };
  const data: JsonObject = {
    job: { id: jobId, status: outcome.status, ...(outcome.status === "exited" ? { exitCode: outcome.exitCode } : {}) },
  };
  return conversationTx(b, conversationId).write(noticeKind, noticeEntry(data, message));
}

/**
 * Consume a pending notice request and publish the notice, in the caller's commit. Every terminal path
 * of the job calls this, so a request is never left behind nor published twice.
 */
export async function consumeNotice(
  b: TxBuilder,
  jobId: Id,
  cmd: string,
  outcome: JobOutcome,
  now: number,
): Promise<boolean> {
  const addr = noticeRequest(jobId);
  const request = await b.value(addr).get();
  if (request === undefined) return false;
  b.value(addr).delete();
  appendNotice(b, request.conversationId, jobId, cmd, outcome, now);
  return true;
}

/**
 * Delegation settlement (§8.3): the job continues without its call. If it is still live, request its
 * completion notice; if it already finished, place the notice now. Either way, one notice.
 */
export async function delegateNotice(
  b: TxBuilder,
  conversationId: Id,
  jobId: Id,
  callId: string,
  now: number,
): Promise<void> {
  const job = await conversationTx(b, conversationId).getTask(jobDefinition, jobId);
  if (job === undefined) return;
  const outcome = outcomeOf(job.state);
  if (outcome === undefined) {
    b.value(noticeRequest(jobId)).set({ conversationId, callId });
    return;
  }
  appendNotice(b, conversationId, jobId, job.state.cmd, outcome, now);
}

function outcomeOf(state: JobState | (Omit<JobInput, never> & { status: "orphaned" })): JobOutcome | undefined {
  switch (state.status) {
    case "exited":
      return { status: "exited", exitCode: state.exitCode, output: state.output };
    case "killed":
      return { status: "killed", output: state.output };
    case "lost":
      return { status: "lost" };
    case "planned":
    case "running":
      return undefined;
    case "orphaned":
      return { status: "lost" };
    default: {
      const never: never = state;
      throw new PicoError("contract", `unknown job status ${JSON.stringify(never)}`);
    }
  }
}

function outputText(output: ToolOutputState): string {
  return output.content
    .flatMap((part) => {
      const p = (typeof part === "object" && part !== null ? part : {}) as { type?: unknown; text?: unknown };
      return p.type === "text" && typeof p.text === "string" ? [p.text] : [];
    })
    .join("");
}

// ---------------------------------------------------------------------------------------------
// The kind

export interface JobServices {
  readonly env: ExecutionEnv;
  /** At most one scratch commit per this many ms while output streams. */
  readonly flushMs: number;
}

export function createJobKind(services: JobServices) {
  const kind = defineTaskKind<JobState, TaskRuntime>()({
    kind: "job",
    roles: jobRoles,
    initialStatus: "planned",
    // A planned job with a notBefore only sleeps until then first (a recurring job between runs).
    sleepsUntil: (state) => (state.status === "planned" ? state.notBefore : undefined),

    async execute(task, runtime, call) {
      if (task.state.status !== "planned")
        throw new PicoError("contract", `job ${task.id} executes only from planned, not ${task.state.status}`);
      const { status: _status, ...input } = task.state;
      if (input.notBefore !== undefined) await runtime.sleep(input.notBefore, call);
      const startedAt = runtime.now();
      // No backlog (§8.6): occurrences that passed while the object slept are recorded, not replayed.
      let skipped = input.skipped;
      if (
        input.every !== undefined &&
        input.every > 0 &&
        input.notBefore !== undefined &&
        startedAt >= input.notBefore + input.every
      ) {
        skipped = (skipped ?? 0) + Math.floor((startedAt - input.notBefore) / input.every);
      }
      const running = { ...input, ...(skipped === undefined ? {} : { skipped }), startedAt };
      // Intent before the effect (§5.3).
      await runtime.commit((tx) => tx.patch(task, "running", running), call);
      await run(task, running, runtime, call);
    },

    async recover(task, runtime, call) {
      if (task.state.status !== "running")
        throw new PicoError("contract", `job ${task.id} recovers only from running, not ${task.state.status}`);
      const { status: _status, ...running } = task.state;
      if (running.rerun === "safe") {
        await run(task, running, runtime, call);
        return;
      }
      // The shell hands out no adoptable process: a job not declared safe to rerun is lost.
      const { startedAt: _startedAt, ...input } = running;
      await runtime.commitBuilder(async (b) => {
        await consumeNotice(b, task.id, input.cmd, { status: "lost" }, runtime.now());
        b.settle(task, "lost", input);
      }, call);
    },

    async abort(task, runtime, call) {
      const { status, ...rest } = task.state;
      const input = stripRunning(rest);
      // The previous invocation and its progress callbacks have returned: scratch is what was captured.
      const folded = status === "running" ? await readSinkScratch(runtime, maxChars(input), call) : emptyFold();
      const output = outputState(folded, true);
      await runtime.commitBuilder(async (b) => {
        await consumeNotice(b, task.id, input.cmd, { status: "killed", output }, runtime.now());
        b.settle(task, "killed", { ...input, output });
      }, call);
    },
  });

  /** One run of the process with the progress bridge, then the run's one commit. */
  async function run(
    task: JobTask,
    running: JobInput & { startedAt: number },
    runtime: TaskRuntime,
    call: Call,
  ): Promise<void> {
    // A recurring or rerun job starts each run with clean scratch (§4.6).
    await runtime.scratch((sc) => {
      sc.list(sinkOps).clear();
      sc.value(sinkCheckpoint).delete();
    }, call);
    const limit = maxChars(running);
    const sink = new ToolSink({
      runtime,
      call,
      flushMs: services.flushMs,
      maxChars: limit,
      preview: runtime.preview(emptyFold()).state,
    });
    let exitCode: number;
    try {
      const result = await services.env.exec(running.cmd, {
        cwd: running.cwd,
        ...(call.abortSignal === undefined ? {} : { signal: call.abortSignal }),
        onUpdate: (chunk) => sink.write(chunk),
        limits: { maxChars: limit },
      });
      exitCode = result.exitCode;
    } catch (error) {
      if (isCancellation(error, call)) {
        // Output captured before the mark stays durable; late output is dropped by the sink.
        await sink.drain().catch(() => undefined);
        throw error;
      }
      // The environment failed to run the process: a domain outcome, recorded as exit code -1.
      sink.write(`${sink.state().text === "" ? "" : "\n"}${error instanceof Error ? error.message : String(error)}`);
      exitCode = -1;
    }
    // A one-shot job settles in the next commit with nothing in between, which would delete a last
    // flush at once (§4.6): its last output is not written, the settlement records it and watchers get
    // it with the settlement commit (§7.4: never before it is durable). A recurring job keeps its
    // scratch until its next run, and a cancelled one's abort reads it.
    const settlesNext = !(running.every !== undefined && running.every > 0) && call.abortSignal?.aborted !== true;
    await sink.drain(settlesNext ? "hold" : "flush");
    const output = outputState(sink.state(), exitCode !== 0);
    const { startedAt: _startedAt, ...input } = running;
    await runtime.commitBuilder(async (b) => {
      const now = runtime.now();
      await consumeNotice(b, task.id, input.cmd, { status: "exited", exitCode, output }, now);
      if (input.every !== undefined && input.every > 0) {
        b.patch(task, "planned", {
          ...input,
          notBefore: now + input.every,
          runs: (input.runs ?? 0) + 1,
          lastExitCode: exitCode,
        });
      } else {
        sink.showUnwritten();
        b.settle(task, "exited", { ...input, output, exitCode });
      }
    }, call);
  }

  return kind;
}

function maxChars(input: JobInput): number {
  return input.limits?.maxChars ?? DEFAULT_EXEC_MAX_CHARS;
}

function stripRunning<T extends JobInput>(state: T & { startedAt?: number }): JobInput {
  const { startedAt: _startedAt, ...input } = state;
  return input;
}

// ---------------------------------------------------------------------------------------------
// Reading a job's output (runtime.jobOutput, the job tool, UIs)

/**
 * A job's output: from scratch while it runs (live), from its terminal state after. Reads committed
 * state only.
 */
export async function readJobOutput(harness: Harness, jobId: Id, call: Call): Promise<JobOutputView | undefined> {
  const job = await harness.getTask(jobDefinition, jobId, call);
  if (job === undefined) return undefined;
  const state = job.state;
  switch (state.status) {
    case "exited":
    case "killed": {
      const text = outputText(state.output);
      const view = {
        status: state.status,
        text,
        totalChars: state.output.truncation.totalChars,
        truncated: state.output.truncation.truncated,
      };
      return state.status === "exited" ? { ...view, exitCode: state.exitCode } : view;
    }
    case "lost":
    case "orphaned":
      return { status: state.status, text: "", totalChars: 0, truncated: false };
    case "planned":
    case "running": {
      const binding = { conversationId: job.conversationId, taskId: job.id };
      const folded: SinkFold = await readSinkScratch(
        { value: (addr) => valueHandle(harness, addr, binding), list: (addr) => listHandle(harness, addr, binding) },
        maxChars(state),
        call,
      );
      return {
        status: state.status,
        text: folded.text,
        totalChars: folded.totalChars,
        truncated: folded.totalChars > folded.text.length,
      };
    }
    default: {
      const never: never = state;
      throw new PicoError("contract", `unknown job status ${JSON.stringify(never)}`);
    }
  }
}

/** Is this task a job (by kind name), for callers holding an untyped record. */
export function isJob(task: Task | undefined): boolean {
  return task?.kind === jobDefinition.kind;
}

/** Is this the invocation's cancellation (mark or close), rather than an ordinary failure? */
function isCancellation(error: unknown, call: Call): boolean {
  return isInvocationCancellation(error, call.abortSignal);
}
