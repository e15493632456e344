/**
 * A call of a catalog tool (docs/tools.md): the tool kind hands over a planned call whose task carries
 * the definition the generation captured (`def`), and everything here reads that capture, never the
 * live catalog, so a recovery or a replay does what the call was made with.
 *
 *   execute:  removed from the catalog / not offered / invalid arguments -> an error result (the model
 *             continues); before_tool as for any tool. Then an approval parks the call (status
 *             `parked`, an `approval` item), a client tool parks it for the frontend's output (a
 *             `client_tool` item), and an HTTP or MCP tool runs (`running`, replay "safe") through
 *             `remoteTool`: its call is a background remote call with the captured target.
 *   parking:  ONE commit makes the parked state, adds the item to both pending lists and declares the
 *             task's wait (`pico.wait/<task>`, key = the item's id, until = its deadline), so the
 *             `awaitAnswer` that follows finds it and commits nothing. The invocation then sleeps on
 *             that external answer: not busy, no heartbeat, no kill counted; a restart recovers the
 *             parked task and waits again.
 *   answer:   ONE commit consumes it: ends the wait, removes the item, records a PendingResolution and
 *             writes what the answer caused (the next park, the HTTP call's intent, or the result).
 */
import { validateToolArguments, type ToolCall } from "@earendil-works/pi-ai";
import { endWait, waitValue, type AnswerOutcome } from "../core/answers.js";
import type { Call } from "../core/call.js";
import { PicoError } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import type { TypedTask } from "../core/task-kind.js";
import { conversationTx, type TxBuilder } from "../core/tx.js";
import type { Id, JsonObject } from "../storage/records.js";
import type { CapturedTool, ToolDefinition } from "./catalog-types.js";
import { approvalAnswer, clientAnswer, updatePending } from "./pending.js";
import { pendingId, type PendingRef, type PendingResolution, type PendingType } from "./pending-types.js";
import { isRemoteDefinition, remoteTool } from "./remote-call-tool.js";
import type { AnyTool } from "./services.js";
import { DEFAULT_MAX_OUTPUT_CHARS, emptyFold, outputState } from "./sink.js";
import type { TaskToolCall, ToolDiag, ToolOutputState, toolRoles, ToolStates } from "./states.js";
import { withChildSpan } from "../core/telemetry.js";
import { GenAiAttr, pendingSpanName } from "../core/telemetry-genai.js";

type ToolTask = TypedTask<ToolStates, typeof toolRoles>;
type ParkedState = Extract<ToolStates, { status: "parked" }>;
type LiveTool = Extract<CapturedTool, { definition: ToolDefinition }>;

/** A client tool waits this long for the frontend's output when its definition names no timeout. */
export const DEFAULT_CLIENT_TIMEOUT_MS = 86_400_000;

/** What a settlement adds beside the result: the consumed items, and writes of the same commit. */
export interface SettleExtras {
  readonly resolved?: readonly PendingResolution[];
  readonly extra?: (b: TxBuilder) => Promise<void> | void;
}

/** What an invocation adds to its result: diagnostics (an approval that timed out) and the consumed items. */
export interface InvokeExtras {
  readonly diags?: readonly ToolDiag[];
  readonly resolved?: readonly PendingResolution[];
}

/** What the tool kind lends a catalog call (its own steps, so both run them the same way). */
export interface CatalogCallKit {
  /** before_tool as the kind runs it: the arguments to run with, or undefined when it blocked (settled). */
  beforeTool(
    task: ToolTask,
    runtime: TaskRuntime,
    toolCall: ToolCall,
    args: JsonObject,
    revalidate: (args: JsonObject) => JsonObject,
    call: Call,
  ): Promise<JsonObject | undefined>;
  invoke(
    task: ToolTask,
    runtime: TaskRuntime,
    tool: AnyTool,
    args: JsonObject,
    budgetMs: number | undefined,
    call: Call,
    extras: InvokeExtras,
  ): Promise<void>;
  settle(
    task: ToolTask,
    runtime: TaskRuntime,
    status: "done" | "aborted",
    output: ToolOutputState,
    call: Call,
    extras: SettleExtras,
  ): Promise<void>;
  errorOutput(message: string, code: string): ToolOutputState;
  /** The session's incarnation, named in pending ids (incarnation.ts); undefined: a session without one. */
  incarnation(): string | undefined;
}

/** Where a call stands between commits. */
type Step =
  | { readonly type: "parked"; readonly state: ParkedState }
  | {
      readonly type: "invoke";
      readonly tool: AnyTool;
      readonly args: JsonObject;
      readonly budgetMs: number | undefined;
      readonly resolved: readonly PendingResolution[];
    }
  | { readonly type: "settled" };

/** The call's durable facts every next state carries. */
interface CallBase {
  readonly call: TaskToolCall;
  readonly assistant: Id;
  readonly args: JsonObject;
  readonly def: LiveTool;
  readonly budgetMs: number | undefined;
  readonly resolved: readonly PendingResolution[];
}

export function catalogCalls(kit: CatalogCallKit) {
  /** execute from planned, for a task whose call captured a catalog definition. */
  async function execute(
    task: ToolTask,
    runtime: TaskRuntime,
    toolCall: ToolCall,
    def: CapturedTool,
    call: Call,
  ): Promise<void> {
    if (task.state.status !== "planned")
      throw new PicoError("contract", `tool ${task.id} executes only from planned, not ${task.state.status}`);
    if (!("definition" in def)) {
      await kit.settle(
        task,
        runtime,
        "done",
        kit.errorOutput(`Tool "${toolCall.name}" was removed from the catalog.`, "tool_removed"),
        call,
        {},
      );
      return;
    }
    if (task.state.offered === false) {
      await kit.settle(
        task,
        runtime,
        "done",
        kit.errorOutput(`Tool "${toolCall.name}" was not offered in this request.`, "not_offered"),
        call,
        {},
      );
      return;
    }
    let args: JsonObject;
    try {
      args = validateCaptured(def, toolCall, toolCall.arguments);
    } catch (error) {
      await kit.settle(task, runtime, "done", kit.errorOutput(describe(error), "invalid_arguments"), call, {});
      return;
    }
    const checked = await kit.beforeTool(
      task,
      runtime,
      toolCall,
      args,
      (replaced) => validateCaptured(def, toolCall, replaced),
      call,
    );
    if (checked === undefined) return;
    const base: CallBase = {
      call: task.state.call,
      assistant: task.state.assistant,
      args: checked,
      def,
      budgetMs: task.state.budgetMs,
      resolved: [],
    };
    const step = await runtime.commitBuilder(
      (b) => next(b, task, runtime, base, def.definition.approval === "always" ? "approval" : "run"),
      call,
    );
    await follow(task, runtime, step, call);
  }

  /** recover(parked): the call waits again (a restart is never an interruption here). */
  async function recover(task: ToolTask, runtime: TaskRuntime, state: ParkedState, call: Call): Promise<void> {
    await follow(task, runtime, { type: "parked", state }, call);
  }

  /** Wait on each park, consume each answer, until the call runs or settles. */
  async function follow(task: ToolTask, runtime: TaskRuntime, first: Step, call: Call): Promise<void> {
    let step = first;
    for (;;) {
      switch (step.type) {
        case "settled":
          return;
        case "invoke":
          await kit.invoke(task, runtime, step.tool, step.args, step.budgetMs, call, {
            diags: resolutionDiags(step.resolved),
            resolved: step.resolved,
          });
          return;
        case "parked": {
          const { pending } = step.state;
          // The wait for a person or a frontend is a span of its own (src/core/telemetry-genai.ts).
          const outcome = await withChildSpan(
            call,
            pendingSpanName(pending.type),
            {
              "pico.pending.type": pending.type,
              "pico.pending.id": pending.id,
              [GenAiAttr.toolName]: step.state.call.name,
              [GenAiAttr.toolCallId]: step.state.call.id,
            },
            async (span) => {
              const answered = await runtime.awaitAnswer(
                pending.id,
                pending.deadline === undefined ? {} : { until: pending.deadline },
                call,
              );
              span.setAttribute("pico.pending.outcome", answered.type);
              return answered;
            },
          );
          step = await consume(task, runtime, step.state, outcome, call);
          break;
        }
        default: {
          const never: never = step;
          throw new PicoError("contract", `unknown step ${JSON.stringify(never)}`);
        }
      }
    }
  }

  /** ONE commit: end the wait, remove the item, record the resolution and what the answer caused. */
  async function consume(
    task: ToolTask,
    runtime: TaskRuntime,
    state: ParkedState,
    outcome: AnswerOutcome,
    call: Call,
  ): Promise<Step> {
    const ref = state.pending;
    const def = state.def;
    if (!("definition" in def)) throw new PicoError("contract", `tool ${task.id} parked without a live definition`);
    const definition = def.definition;
    const resolution: PendingResolution =
      outcome.type === "answered"
        ? { id: ref.id, type: ref.type, outcome: "answered", answer: outcome.value, at: outcome.at }
        : { id: ref.id, type: ref.type, outcome: "timeout", at: runtime.now() };
    const resolved = [...(state.resolved ?? []), resolution];
    const close = async (b: TxBuilder): Promise<void> => {
      endWait(b, task.id);
      await updatePending(b, task.conversationId, { remove: ref.id });
    };
    const settleWith = async (output: ToolOutputState): Promise<Step> => {
      // The items consumed before this one were answered so that the call went on (approved, or allowed at its
      // deadline).
      output.diags.push(...resolutionDiags(state.resolved));
      await kit.settle(task, runtime, "done", output, call, { resolved, extra: close });
      return { type: "settled" };
    };

    if (ref.type === "approval") {
      const answer = outcome.type === "answered" ? approvalAnswer(outcome.value) : undefined;
      if (outcome.type === "answered" && answer?.approve !== true) {
        const reason = answer?.reason;
        return settleWith(
          kit.errorOutput(
            `Tool call denied: ${reason === undefined || reason === "" ? "no reason given" : reason}`,
            "denied",
          ),
        );
      }
      if (outcome.type === "deadline" && definition.onTimeout !== "allow") {
        const output = kit.errorOutput(`Tool call not approved in time: it did not run.`, "approval_timeout");
        output.diags.push({
          severity: "error",
          message: `approval timed out after ${seconds(definition.approvalTimeoutMs)} (onTimeout: deny)`,
          code: "approval_timeout",
        });
        return settleWith(output);
      }
      const base: CallBase = {
        call: state.call,
        assistant: state.assistant,
        args: state.args,
        def,
        budgetMs: state.budgetMs,
        resolved,
      };
      return runtime.commitBuilder(async (b) => {
        // The client tool's park (if that is next) declares a new wait over this one: end it only otherwise.
        if (definition.handler.type !== "client") endWait(b, task.id);
        return next(b, task, runtime, base, "run", ref.id);
      }, call);
    }

    if (outcome.type === "deadline") {
      const output = kit.errorOutput(`The client did not return the tool's output in time.`, "client_timeout");
      output.diags.push({
        severity: "error",
        message: `client tool timed out after ${seconds(clientTimeout(definition))}`,
        code: "client_timeout",
      });
      return settleWith(output);
    }
    const answer = clientAnswer(outcome.value);
    if (answer === undefined)
      return settleWith(kit.errorOutput("The client's answer holds no output.", "invalid_answer"));
    const text = typeof answer.output === "string" ? answer.output : JSON.stringify(answer.output);
    const fold = emptyFold();
    fold.text = text.length > DEFAULT_MAX_OUTPUT_CHARS ? text.slice(text.length - DEFAULT_MAX_OUTPUT_CHARS) : text;
    fold.totalChars = text.length;
    return settleWith(outputState(fold, answer.isError));
  }

  /**
   * In a commit: write the call's next state. `approval` parks for an approval; `run` parks a client
   * tool for its output, or marks an HTTP or MCP tool running (intent before the request, §5.3). `remove`
   * is the item this commit consumes (removed from the lists in the same write).
   */
  async function next(
    b: TxBuilder,
    task: ToolTask,
    runtime: TaskRuntime,
    base: CallBase,
    stage: "approval" | "run",
    remove?: string,
  ): Promise<Step> {
    const tx = conversationTx(b, task.conversationId);
    const definition = base.def.definition;
    const budget = base.budgetMs === undefined ? {} : { budgetMs: base.budgetMs };
    const resolved = base.resolved.length === 0 ? {} : { resolved: [...base.resolved] };
    const handler = definition.handler;
    if (stage === "approval" || handler.type === "client") {
      const type: PendingType = stage === "approval" ? "approval" : "client_tool";
      const now = runtime.now();
      const timeout = type === "approval" ? definition.approvalTimeoutMs : clientTimeout(definition);
      const pending: PendingRef = {
        id: pendingId(task.id, type, kit.incarnation()),
        type,
        createdAt: now,
        ...(timeout === undefined ? {} : { deadline: now + timeout }),
      };
      const state: ParkedState = {
        status: "parked",
        call: base.call,
        assistant: base.assistant,
        args: base.args,
        def: base.def,
        ...budget,
        pending,
        ...resolved,
      };
      tx.patch(task, "parked", withoutStatus(state));
      await updatePending(b, task.conversationId, {
        ...(remove === undefined ? {} : { remove }),
        add: {
          ...pending,
          taskId: task.id,
          conversationId: task.conversationId,
          name: base.call.name,
          arguments: base.args,
        },
      });
      b.value(waitValue(task.id)).set({
        key: pending.id,
        since: now,
        ...(pending.deadline === undefined ? {} : { until: pending.deadline }),
      });
      return { type: "parked", state };
    }
    if (!isRemoteDefinition(definition))
      throw new PicoError("contract", `tool ${task.id}: a ${handler.type} handler does not run remotely`);
    if (remove !== undefined) await updatePending(b, task.conversationId, { remove });
    tx.patch(task, "running", {
      call: base.call,
      assistant: base.assistant,
      args: base.args,
      replay: "safe",
      ...budget,
      def: base.def,
      ...resolved,
    });
    return {
      type: "invoke",
      tool: remoteTool(base.call.name, base.def.version, definition),
      args: base.args,
      budgetMs: base.budgetMs,
      resolved: base.resolved,
    };
  }

  return { execute, recover };
}

/** The tool a running call with a captured definition runs as (recovery rebuilds it from the capture). */
export function capturedTool(def: CapturedTool | undefined): AnyTool | undefined {
  if (def === undefined || !("definition" in def) || !isRemoteDefinition(def.definition)) return undefined;
  return remoteTool(def.name, def.version, def.definition);
}

/** An item left the list because its call was aborted: the resolution, the wait ended, the item removed. */
export function abortParked(task: ToolTask, state: ParkedState, at: number): SettleExtras {
  const ref = state.pending;
  const resolution: PendingResolution = { id: ref.id, type: ref.type, outcome: "aborted", at };
  return {
    resolved: [...(state.resolved ?? []), resolution],
    extra: async (b) => {
      endWait(b, task.id);
      await updatePending(b, task.conversationId, { remove: ref.id });
    },
  };
}

/** What the consumed items add to the result of a call that went on: an approval that timed out was allowed. */
export function resolutionDiags(resolved: readonly PendingResolution[] | undefined): ToolDiag[] {
  return (resolved ?? [])
    .filter((r) => r.type === "approval" && r.outcome === "timeout")
    .map(() => ({
      severity: "warn",
      message: "approval timed out; onTimeout allow: ran without approval",
      code: "approval_timeout_allowed",
    }));
}

function validateCaptured(def: LiveTool, toolCall: ToolCall, args: JsonObject): JsonObject {
  const validated: unknown = validateToolArguments(
    { name: def.name, description: def.definition.description, parameters: def.definition.parameters as never },
    { ...toolCall, arguments: args },
  );
  if (validated === null || typeof validated !== "object" || Array.isArray(validated)) {
    throw new Error(`Validation failed for tool "${def.name}": arguments must be an object`);
  }
  return validated as JsonObject;
}

function clientTimeout(definition: ToolDefinition): number {
  return definition.handler.type === "client" ? definition.handler.timeoutMs : DEFAULT_CLIENT_TIMEOUT_MS;
}

function withoutStatus(state: ParkedState): Omit<ParkedState, "status"> {
  const { status: _status, ...rest } = state;
  return rest;
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? "its deadline" : `${Math.round(ms / 1000)}s`;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
