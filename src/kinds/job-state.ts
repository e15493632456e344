/**
 * The job task kind's state (§8.6) and the view of a job's output: types only, so the job kind
 * (job.ts), the services its runtime exposes (services.ts) and the job tool share them without importing
 * each other.
 */
import type { Id, JsonObject } from "../storage/records.js";
import type { ToolOutputState } from "./states.js";

export interface JobOrigin extends JsonObject {
  tool: string;
  task: Id;
  callId: string;
}

/** The job's input, carried by every variant; recurrence and recovery policy live here (§8.6). */
export type JobInput = {
  cmd: string;
  cwd: string;
  limits?: { maxChars?: number };
  origin?: JobOrigin;
  every?: number;
  notBefore?: number;
  rerun?: "safe";
  /** Recurring: completed runs, occurrences skipped after downtime (never replayed), last exit code. */
  runs?: number;
  skipped?: number;
  lastExitCode?: number;
};

export type JobState =
  | (JobInput & { status: "planned" })
  | (JobInput & { status: "running"; startedAt: number })
  | (JobInput & { status: "exited"; output: ToolOutputState; exitCode: number })
  | (JobInput & { status: "killed"; output: ToolOutputState })
  | (JobInput & { status: "lost" });

/** What a read of a job's output returns (runtime.jobOutput, the job tool, UIs). */
export interface JobOutputView {
  readonly status: JobState["status"] | "orphaned";
  readonly text: string;
  readonly totalChars: number;
  readonly truncated: boolean;
  readonly exitCode?: number;
}
