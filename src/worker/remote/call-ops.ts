/**
 * The session side of `POST /v1/tool-results/{tenant}/{session}/{taskId}` (http/routes/tool-results.ts): which
 * tool a remote call serves (so the Worker can check the delivery's signature with that tool's secret) and
 * the session's incarnation (the delivery's webhook-id must name it), and recording a posted result once as
 * the remote call's answer (`pico.wait/<taskId>`, key "result"); a result of another incarnation is unknown.
 * The route never patches the task: the remote call consumes its answer in its own commit.
 */
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import { readWait } from "../../core/answers.js";
import { PicoError } from "../../core/errors.js";
import type { Harness } from "../../core/harness.js";
import { REMOTE_RESULT_KEY, remoteCallDefinition } from "../../kinds/remote-call.js";
import type { Id, JsonObject, JsonValue } from "../../storage/records.js";

/** A posted result, as the route validated it. */
export interface ToolResultPost {
  readonly output: JsonValue;
  readonly isError?: boolean;
}

/** What recording a posted result did. */
export type ToolResultRecord =
  | { readonly type: "recorded"; readonly at: number }
  /** Answered before (by a posted result, or the call's own 200): the committed one. */
  | { readonly type: "already_answered"; readonly answer: ToolResultPost }
  /** The call ended without a result (an error, a timeout, an abort) or awaits none. */
  | { readonly type: "closed"; readonly outcome: string }
  | { readonly type: "unknown" };

/** The remote-call operations of the session's op table (session/ops.ts): arguments and results. */
export interface RemoteCallSessionOps {
  /**
   * The catalog tool remote call `taskId` serves, and the session's incarnation (none: a session created before
   * incarnations); null when there is no such remote call.
   */
  remoteCallTool: {
    readonly args: [taskId: Id];
    readonly result: { readonly tool: string; readonly incarnation: string | null } | null;
  };
  /** Record the result of remote call `taskId` of incarnation `incarnation`: another incarnation's is unknown. */
  answerRemoteCall: {
    readonly args: [taskId: Id, incarnation: string | null, result: ToolResultPost];
    readonly result: ToolResultRecord;
  };
}

const call: Call = BACKGROUND_CONTEXT;

async function toolOf(
  harness: Harness,
  taskId: Id,
  incarnation: string | undefined,
): Promise<{ readonly tool: string; readonly incarnation: string | null } | null> {
  const task = await harness.getTask(remoteCallDefinition, taskId, call);
  // Only an HTTP tool's call takes a posted result; an MCP call answers in its own response.
  return task === undefined || task.state.status === "orphaned" || task.state.target.type !== "http"
    ? null
    : { tool: task.state.target.tool, incarnation: incarnation ?? null };
}

async function answer(
  harness: Harness,
  taskId: Id,
  current: boolean,
  result: ToolResultPost,
): Promise<ToolResultRecord> {
  // A result for a deleted incarnation's call names no call of this session, whatever its task id.
  if (!current || (await harness.getTask(remoteCallDefinition, taskId, call)) === undefined) return { type: "unknown" };
  try {
    const { at } = await harness.answer(taskId, REMOTE_RESULT_KEY, recorded(result), call);
    return { type: "recorded", at };
  } catch (error) {
    if (!(error instanceof PicoError) || (error.code !== "not_found" && error.code !== "conflict")) throw error;
  }
  // Refused (nothing written): say why from what is committed.
  const wait = await readWait(harness.storage, taskId);
  if (wait?.key === REMOTE_RESULT_KEY && wait.answer !== undefined)
    return { type: "already_answered", answer: asPost(wait.answer.value) };
  const task = await harness.getTask(remoteCallDefinition, taskId, call);
  const state = task?.state;
  if (state === undefined || state.status === "orphaned") return { type: "unknown" };
  if (state.status === "settled" || state.status === "aborted") {
    const outcome = state.outcome;
    if (state.status === "settled" && outcome.type === "output")
      return { type: "already_answered", answer: { output: outcome.output, isError: outcome.isError } };
    return { type: "closed", outcome: outcome.type === "error" ? outcome.code : state.status };
  }
  return { type: "closed", outcome: "not_waiting" };
}

function recorded(result: ToolResultPost): JsonObject {
  return { output: result.output, ...(result.isError === undefined ? {} : { isError: result.isError }) };
}

function asPost(value: JsonValue): ToolResultPost {
  if (value !== null && typeof value === "object" && !Array.isArray(value) && "output" in value) {
    return {
      output: value["output"] ?? null,
      ...(typeof value["isError"] === "boolean" ? { isError: value["isError"] } : {}),
    };
  }
  return { output: value };
}

/** The remote-call entries of the SessionObject's op table, over the open session's harness. */
export function remoteCallOps<S extends { readonly harness: Harness; readonly incarnation: string | undefined }>(): {
  readonly [K in keyof RemoteCallSessionOps]: (
    session: S,
    ...args: RemoteCallSessionOps[K]["args"]
  ) => Promise<RemoteCallSessionOps[K]["result"]>;
} {
  return {
    remoteCallTool: (s, taskId) => toolOf(s.harness, taskId, s.incarnation),
    answerRemoteCall: (s, taskId, incarnation, result) =>
      answer(s.harness, taskId, (incarnation ?? undefined) === s.incarnation, result),
  };
}
