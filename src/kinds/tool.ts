/**
 * The built-in tool task kind (§8.3, §5.5): one task per tool call of an assistant message. Each tool
 * executes and settles itself — resolve, validate, before_tool, intent, invocation with the sink,
 * after_tool, one settlement commit with the result entry — and never looks at siblings, queues or
 * context; post_tools (src/kinds/post-tools.ts) joins the exchange.
 *
 *   execute:  resolve the tool (the loadout may have changed since the turn started); validate the
 *             arguments; before_tool (fail-closed: a throw blocks). unknown / invalid / blocked -> its
 *             own error result, no invocation. Otherwise { running { args, replay } } before any effect
 *             (§5.3), invoke with the sink, drain it, after_tool outside the line, then
 *             { result entry; usage row; settle done }.
 *   recover:  replay "safe" -> clear scratch and run again; "never" -> an interrupted error result from
 *             the durable scratch; parked -> wait for the answer again (tool-catalog-call.ts).
 *   abort:    a fresh invocation after execute returned: read durable scratch, mark the live foreground
 *             tasks of the conversations this task owns (never their queues), write an aborted error
 *             result, settle aborted.
 *
 * A call of a catalog tool (its task carries the definition the generation captured, `def`) runs in
 * tool-catalog-call.ts: approvals and client tools park it (status `parked`) on a durable answer, and
 * an HTTP tool runs from the captured definition, never the live catalog.
 *
 * An ordinary tool throw is an error result (isError), not a cancellation; `out.terminate(true); throw`
 * still terminates the turn. Diagnostics are rendered after the data in a `<harness>` block (§9.3).
 */
import {
  validateToolArguments,
  type ImageContent,
  type TextContent,
  type ToolCall,
  type ToolResultMessage,
  type Usage,
} from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { toolResultEntry, toolResultKind } from "../core/entries.js";
import { PicoError, TaskCancelled, isInvocationCancellation } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import { defineTaskKind, type HookPoints, type TaskDefinition, type TypedTask } from "../core/task-kind.js";
import { conversationTx, type TxBuilder } from "../core/tx.js";
import type { Id, JsonObject, JsonValue, Task } from "../storage/records.js";
import { ownershipChain } from "./chain.js";
import { DEFAULT_JOB_CWD, delegateNotice, jobDefinition, readJobOutput, type JobState } from "./job.js";
import type { PendingResolution } from "./pending-types.js";
import type { AnyTool, ToolRuntime, TurnServices } from "./services.js";
import {
  DEFAULT_MAX_OUTPUT_CHARS,
  emptyFold,
  outputState,
  readSinkScratch,
  sinkCheckpoint,
  sinkOps,
  ToolSink,
} from "./sink.js";
import { toolRoles, type TaskToolCall, type ToolDiag, type ToolOutputState, type ToolStates } from "./states.js";
import { compactToolData } from "./stored.js";
import { delegateSubagentNotice } from "./subagent-notice.js";
import { delegateRemoteNotice, isRemoteCall, readRemoteCall, remoteCallDefinition } from "./remote-call.js";
import type { RemoteCallState } from "./remote-call-state.js";
import {
  abortParked,
  capturedTool,
  catalogCalls,
  resolutionDiags,
  type InvokeExtras,
  type SettleExtras,
} from "./tool-catalog-call.js";
import { recordUsage } from "./usage.js";
import { startChildSpan } from "../core/telemetry.js";
import { executeToolSpanName, GenAiAttr } from "../core/telemetry-genai.js";

export interface ToolHooks extends HookPoints {
  before_tool: {
    input: { toolCallId: string; toolName: string; args: JsonObject };
    output: { args?: JsonObject; block?: { reason: string; terminate?: boolean } };
  };
  after_tool: { input: { toolCallId: string; output: ToolOutputState }; output: void };
}

export type BeforeToolOutput = ToolHooks["before_tool"]["output"];

/** The tool kind's state witness, for typed reads by name (post_tools reads tool tasks with it). */
export const toolDefinition: TaskDefinition<ToolStates, typeof toolRoles> = { kind: "tool", roles: toolRoles };

type ToolTask = TypedTask<ToolStates, typeof toolRoles>;

export function createToolKind(services: TurnServices) {
  const kind = defineTaskKind<ToolStates, TaskRuntime, ToolHooks>()({
    kind: "tool",
    roles: toolRoles,
    initialStatus: "planned",
    turn: true,
    hooks: { before_tool: { failClosed: true }, after_tool: {} },

    async execute(task, runtime, call) {
      if (task.state.status !== "planned")
        throw new PicoError("contract", `tool ${task.id} executes only from planned, not ${task.state.status}`);
      const toolCall = liveCall(task.id, task.state.call);
      // A catalog tool's call runs from the definition its generation captured (tool-catalog-call.ts).
      if (task.state.def !== undefined && services.tools.get(toolCall.name) === undefined) {
        await catalog.execute(task, runtime, toolCall, task.state.def, call);
        return;
      }
      if (task.state.offered === false) {
        await settle(
          task,
          runtime,
          "done",
          errorOutput(`Tool "${toolCall.name}" was not offered in this request.`, "not_offered"),
          call,
        );
        return;
      }
      const tool = services.tools.get(toolCall.name);
      if (tool === undefined) {
        await settle(
          task,
          runtime,
          "done",
          errorOutput(`Tool "${toolCall.name}" is not available.`, "unavailable"),
          call,
        );
        return;
      }
      let args: JsonObject;
      try {
        args = validate(tool, toolCall, toolCall.arguments);
      } catch (error) {
        await settle(task, runtime, "done", errorOutput(describe(error), "invalid_arguments"), call);
        return;
      }

      const chain = await ownershipChain(runtime, task.conversationId, call);
      const checked = await beforeTool(
        task,
        runtime,
        toolCall,
        args,
        (replaced) => validate(tool, toolCall, replaced),
        chain,
        call,
      );
      if (checked === undefined) return;
      args = checked;

      const replay = tool.replay ?? "never";
      // Intent before effects (§5.3): a crash from here on goes through recover.
      const budget = task.state.budgetMs === undefined ? {} : { budgetMs: task.state.budgetMs };
      await runtime.commit(
        (tx) => tx.patch(task, "running", { call: toolCall, assistant: task.state.assistant, args, replay, ...budget }),
        call,
      );
      await invoke(task, runtime, tool, args, task.state.budgetMs, chain, call);
    },

    async recover(task, runtime, call) {
      if (task.state.status === "parked") {
        await catalog.recover(task, runtime, task.state, call);
        return;
      }
      if (task.state.status !== "running")
        throw new PicoError(
          "contract",
          `tool ${task.id} recovers only from running or parked, not ${task.state.status}`,
        );
      const state = task.state;
      // A catalog tool is rebuilt from its captured definition, never from the live catalog.
      const tool = state.def === undefined ? services.tools.get(state.call.name) : capturedTool(state.def);
      if (state.replay === "safe" && tool !== undefined) {
        // A retry is the same task: the attempt starts with clean scratch (§4.6).
        await runtime.scratch((sc) => {
          sc.list(sinkOps).clear();
          sc.value(sinkCheckpoint).delete();
        }, call);
        const chain = await ownershipChain(runtime, task.conversationId, call);
        await invoke(task, runtime, tool, state.args, state.budgetMs, chain, call, {
          diags: resolutionDiags(state.resolved),
          ...resolvedOf(state),
        });
        return;
      }
      const folded = await readSinkScratch(runtime, tool?.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS, call);
      folded.diags.push(
        diag(
          "error",
          `the call was interrupted by a restart and not run again (replay: ${state.replay}); the output above is what was recorded before the interruption`,
          "interrupted",
        ),
      );
      // The job this call started is named in its result. A restart is not an abort, so the call's
      // cancel-on-abort policy does not end it; the job's own recovery policy applies (rerun "safe"
      // runs it again, otherwise it settles lost), and the model follows it by id. No delegation: its
      // notice would land inside this still-running turn, between this result and the next request.
      if (state.jobId !== undefined) {
        folded.diags.push(
          diag(
            "info",
            `job ${state.jobId}, which this call started, continues under its own recovery policy (a job not safe to rerun is lost); use job wait / status / stop with id ${state.jobId}`,
            "job",
          ),
        );
      }
      await settle(task, runtime, "done", outputState(folded, true), call, undefined, resolvedOf(state));
    },

    async abort(task, runtime, call) {
      const tool = services.tools.get(task.state.call.name);
      const folded = await readSinkScratch(runtime, tool?.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS, call);
      await markOwnedChildren(task, runtime, call);
      // The job this call started, cancelled per the policy recorded with it (§6.3: durable references
      // only); an already-finished job is finished cleanup.
      if (task.state.status === "running" && task.state.jobId !== undefined && task.state.cancelJobOnAbort === true) {
        await runtime.markIfLive([task.state.jobId], call);
      }
      if (
        task.state.status === "running" &&
        task.state.remoteCallId !== undefined &&
        task.state.cancelRemoteOnAbort === true
      ) {
        await runtime.markIfLive([task.state.remoteCallId], call);
      }
      if (task.state.status === "planned" || task.state.status === "parked") {
        folded.text =
          task.state.status === "planned"
            ? "Tool call aborted before it ran."
            : `Tool call aborted while it waited for ${task.state.pending.type === "approval" ? "an approval" : "the client's output"}.`;
        folded.totalChars = folded.text.length;
      }
      folded.diags.push(diag("error", "the call was aborted", "aborted"));
      // A parked call's item leaves the list in the settling commit, its wait ended, resolved "aborted".
      const extras =
        task.state.status === "parked"
          ? abortParked(task, task.state, runtime.now())
          : task.state.status === "running"
            ? resolvedOf(task.state)
            : {};
      await settle(task, runtime, "aborted", outputState(folded, true), call, undefined, extras);
    },
  });

  /** Invoke the tool with a fresh sink, drain it, run after_tool, settle done. */
  async function invoke(
    task: ToolTask,
    runtime: TaskRuntime,
    tool: AnyTool,
    args: JsonObject,
    captured: number | undefined,
    chain: readonly Id[],
    call: Call,
    extras: InvokeExtras = {},
  ): Promise<void> {
    const toolCall = liveCall(task.id, task.state.call);
    const sink = new ToolSink({
      runtime,
      call,
      flushMs: services.options.flushMs,
      maxChars: tool.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS,
      preview: runtime.preview(emptyFold()).state,
    });
    // The budget the generation captured (§8.3), never the conversation's live value; absent: the default.
    const budgetMs = captured ?? services.options.toolBudgetMs;
    for (const d of extras.diags ?? []) sink.diag(d.severity, d.message, d.code ?? undefined);
    let isError = false;
    // One `execute_tool {name}` span per execution (GenAI conventions, src/core/telemetry-genai.ts).
    const span = startChildSpan(call, executeToolSpanName(toolCall.name), {
      [GenAiAttr.operationName]: "execute_tool",
      [GenAiAttr.toolName]: toolCall.name,
      [GenAiAttr.toolCallId]: toolCall.id,
      [GenAiAttr.toolType]: "function",
    });
    try {
      await tool.execute(toolCall.id, args, sink, toolRuntime(runtime, budgetMs, toolCall), call);
      span.setStatus("ok");
    } catch (error) {
      span.recordError(error);
      if (isCancellation(error, call)) {
        span.setStatus("error", "cancelled");
        span.setAttribute(GenAiAttr.errorType, "cancelled");
        span.end();
        await sink.drain().catch(() => undefined);
        throw error;
      }
      // An ordinary throw is the call's error result; terminate set before it still counts.
      isError = true;
      const message = describe(error);
      span.setStatus("error", message);
      span.setAttribute(GenAiAttr.errorType, error instanceof Error ? error.name : "tool_error");
      if (sink.state().text === "") sink.replace(message);
      else sink.write(`\n${message}`);
    }
    span.end();
    // The sink's scratch promises are joined before anything else; a real persistence error faults.
    // Its last output is written only when after_tool runs before the settlement (it may block on the
    // world, §8.7) or the call was cancelled (abort reads scratch); otherwise the settlement follows at
    // once and would delete it (§4.6), so it is never written: the settlement records it, and watchers
    // get it with the settlement commit, once it is durable (§7.4; a kill before it loses nothing they
    // saw, and an interrupted result holds every line shown).
    const settlesNext =
      call.abortSignal?.aborted !== true && services.hooks.handlers(kind.kind, "after_tool", chain).length === 0;
    await sink.drain(settlesNext ? "hold" : "flush");
    const output = sink.output(isError);
    await services.hooks.run(kind, "after_tool", { toolCallId: toolCall.id, output }, chain, call);
    await settle(
      task,
      runtime,
      "done",
      output,
      call,
      () => sink.showUnwritten(),
      extras.resolved === undefined ? {} : { resolved: extras.resolved },
    );
  }

  /**
   * before_tool (fail-closed: a throw blocks, §8.7): the arguments to run with (re-validated when the
   * hook replaced them), or undefined when the call was blocked or its replaced arguments are invalid
   * (its error result settled).
   */
  async function beforeTool(
    task: ToolTask,
    runtime: TaskRuntime,
    toolCall: ToolCall,
    args: JsonObject,
    revalidate: (args: JsonObject) => JsonObject,
    chain: readonly Id[],
    call: Call,
  ): Promise<JsonObject | undefined> {
    let decision: Partial<BeforeToolOutput>;
    try {
      decision = await services.hooks.run<BeforeToolOutput>(
        kind,
        "before_tool",
        { toolCallId: toolCall.id, toolName: toolCall.name, args },
        chain,
        call,
      );
    } catch (error) {
      if (isCancellation(error, call)) throw error;
      // failClosed: a throwing before_tool blocks the tool (§8.7).
      decision = {
        block: {
          reason: `before_tool failed: ${describe(error instanceof PicoError && error.cause !== undefined ? error.cause : error)}`,
        },
      };
    }
    if (decision.block !== undefined) {
      const output = errorOutput(
        `Tool call blocked: ${decision.block.reason}`,
        "blocked",
        decision.block.terminate === true,
      );
      await settle(task, runtime, "done", output, call);
      return undefined;
    }
    if (decision.args === undefined) return args;
    try {
      return revalidate(decision.args);
    } catch (error) {
      await settle(
        task,
        runtime,
        "done",
        errorOutput(`before_tool supplied invalid arguments: ${describe(error)}`, "invalid_arguments"),
        call,
      );
      return undefined;
    }
  }

  const catalog = catalogCalls({
    beforeTool: async (task, runtime, toolCall, args, revalidate, call) =>
      beforeTool(
        task,
        runtime,
        toolCall,
        args,
        revalidate,
        await ownershipChain(runtime, task.conversationId, call),
        call,
      ),
    invoke: async (task, runtime, tool, args, budgetMs, call, extras) =>
      invoke(
        task,
        runtime,
        tool,
        args,
        budgetMs,
        await ownershipChain(runtime, task.conversationId, call),
        call,
        extras,
      ),
    settle: (task, runtime, status, output, call, extras) =>
      settle(task, runtime, status, output, call, undefined, extras),
    errorOutput: (message, code) => errorOutput(message, code),
    incarnation: () => services.incarnation?.(),
  });

  return kind;
}

// ---------------------------------------------------------------------------------------------
// settlement

/**
 * One commit: the result entry, a usage row when the sink got usage, the terminal variant. The terminal
 * state records the output without its content, which the result entry's message holds. `show` runs in
 * the plan: the live sink's unwritten output joins the preview, published with this commit.
 */
async function settle(
  task: ToolTask,
  runtime: TaskRuntime,
  status: "done" | "aborted",
  output: ToolOutputState,
  call: Call,
  show?: () => void,
  extras: SettleExtras = {},
): Promise<void> {
  const toolCall = task.state.call;
  const assistant = task.state.assistant;
  await runtime.commitBuilder(async (b) => {
    show?.();
    const tx = conversationTx(b, task.conversationId);
    const message = resultMessage(toolCall, output, runtime.now());
    const { content: _content, ...full } = output;
    // Stored compact (fewer bytes per row): defaults absent; `readToolData` fills them back.
    const data = compactToolData(full);
    const result = tx.entry(toolResultKind, toolResultEntry(message, data));
    if (output.usage !== null) {
      await recordUsage(b, {
        conversationId: task.conversationId,
        taskId: task.id,
        kind: "tool",
        model: toolCall.name,
        usage: output.usage as Usage & JsonObject,
      });
    }
    // Delegation settlement (§8.3): the job or subagent continues without this call; its notice is
    // requested, or placed now if it already finished, in this same commit.
    if (status === "done" && output.delegated !== null)
      await delegationNotice(b, task.conversationId, output.delegated, toolCall.id, output.details, runtime.now());
    // The call without its arguments and signature (the assistant entry holds them) and its constant type.
    const settled: TaskToolCall = {
      id: toolCall.id,
      name: toolCall.name,
      ...(toolCall.namespace === undefined ? {} : { namespace: toolCall.namespace }),
    };
    await extras.extra?.(b);
    // The pending items the call consumed stay with it, so a late answer is refused with what happened.
    const resolved =
      extras.resolved === undefined || extras.resolved.length === 0 ? {} : { resolved: [...extras.resolved] };
    if (status === "done") tx.settle(task, "done", { call: settled, assistant, output: data, result, ...resolved });
    else tx.settle(task, "aborted", { call: settled, assistant, output: data, result, ...resolved });
  }, call);
}

/**
 * What a delegation settles into (§8.3): a delegated conversation is a subagent whose call names the
 * input it waited for in its details (`inputId`, src/tools/subagent.ts); anything else is a job.
 */
async function delegationNotice(
  b: TxBuilder,
  conversationId: Id,
  delegated: Id,
  callId: string,
  details: JsonValue,
  now: number,
): Promise<void> {
  if ((await b.getConversation(delegated)) !== undefined) {
    const inputId =
      details !== null && typeof details === "object" && !Array.isArray(details)
        ? (details as JsonObject)["inputId"]
        : undefined;
    if (typeof inputId === "number") await delegateSubagentNotice(b, conversationId, delegated, inputId, callId);
    return;
  }
  if (await isRemoteCall(b, delegated)) {
    await delegateRemoteNotice(b, conversationId, delegated, callId, now);
    return;
  }
  await delegateNotice(b, conversationId, delegated, callId, now);
}

/** The exact message the model sees: the data first, then the diagnostics in a delimited block (§9.3). */
export function resultMessage(
  toolCall: Pick<ToolCall, "id" | "name">,
  output: ToolOutputState,
  timestamp: number,
): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: toolCall.id,
    toolName: toolCall.name,
    content: renderContent(output),
    isError: output.isError,
    timestamp,
  };
}

export function renderContent(output: Pick<ToolOutputState, "content" | "diags">): (TextContent | ImageContent)[] {
  const content = (output.content as unknown as (TextContent | ImageContent)[]).map((part) => ({ ...part }));
  if (output.diags.length === 0) return content;
  const block = `<harness>\n${output.diags.map((d) => `[${d.severity}] ${d.message}`).join("\n")}\n</harness>`;
  const last = content[content.length - 1];
  if (last?.type === "text") content[content.length - 1] = { type: "text", text: `${last.text}\n${block}` };
  else content.push({ type: "text", text: block });
  return content;
}

/** An error result for a call that never ran (unknown tool, invalid arguments, blocked). */
export function errorOutput(message: string, code: string, terminate = false): ToolOutputState {
  const state = emptyFold();
  state.text = message;
  state.totalChars = message.length;
  state.terminate = terminate;
  // The text is the whole result; the code travels in data for typed logic, not as a second notice.
  return { ...outputState(state, true), details: { error: code } };
}

// ---------------------------------------------------------------------------------------------
// helpers

/** The whole call of a live tool task (planned or running), which always carries its arguments. */
function liveCall(id: Id, call: TaskToolCall): ToolCall {
  const args = call.arguments;
  if (args === undefined) throw new PicoError("contract", `tool ${id}: a live call carries its arguments`);
  return { ...call, type: "toolCall", arguments: args };
}

function validate(tool: AnyTool, toolCall: ToolCall, args: JsonObject): JsonObject {
  const validated: unknown = validateToolArguments(
    { name: tool.name, description: tool.description, parameters: tool.parameters },
    { ...toolCall, arguments: args },
  );
  if (validated === null || typeof validated !== "object" || Array.isArray(validated)) {
    throw new Error(`Validation failed for tool "${tool.name}": arguments must be an object`);
  }
  return validated as JsonObject;
}

function toolRuntime(runtime: TaskRuntime, budgetMs: number, toolCall: ToolCall): ToolRuntime {
  return {
    startJob: (input, call) =>
      runtime.commit(async (tx) => {
        const task = await tx.getTask(toolDefinition, runtime.taskId);
        if (task?.state.status !== "running")
          throw new PicoError("contract", `tool ${runtime.taskId} starts a job only while running`);
        if (task.state.jobId !== undefined)
          throw new PicoError("conflict", `tool call ${toolCall.id} already started job ${task.state.jobId}`);
        const { status: _status, ...payload } = task.state;
        const state: JobState = {
          status: "planned",
          cmd: input.cmd,
          cwd: input.cwd ?? DEFAULT_JOB_CWD,
          origin: { tool: toolCall.name, task: runtime.taskId, callId: toolCall.id },
          ...(input.limits?.maxChars === undefined ? {} : { limits: { maxChars: input.limits.maxChars } }),
          ...(input.every === undefined ? {} : { every: input.every }),
          ...(input.notBefore === undefined ? {} : { notBefore: input.notBefore }),
          ...(input.rerun === undefined ? {} : { rerun: input.rerun }),
        };
        const id = tx.task(jobDefinition, { background: true, state });
        tx.patch(task, "running", { ...payload, jobId: id, cancelJobOnAbort: input.detach !== true });
        return id;
      }, call),
    jobOutput: async (id, call) => {
      const handle = await runtime.conversation(runtime.conversationId, call);
      const view = handle === undefined ? undefined : await readJobOutput(handle.harness, id, call);
      if (view === undefined) throw new PicoError("not_found", `job ${id} does not exist`);
      return view;
    },
    // The remote call of an HTTP tool (remote-call.ts): created once per tool task, so a replay waits for the same one.
    startRemoteCall: (input, call) =>
      runtime.commit(async (tx) => {
        const task = await tx.getTask(toolDefinition, runtime.taskId);
        if (task?.state.status !== "running")
          throw new PicoError("contract", `tool ${runtime.taskId} starts a remote call only while running`);
        if (task.state.remoteCallId !== undefined) return task.state.remoteCallId;
        const { status: _status, ...payload } = task.state;
        const state: RemoteCallState = {
          status: "planned",
          target: input.target,
          name: input.name,
          arguments: input.arguments,
          origin: { tool: toolCall.name, task: runtime.taskId, callId: toolCall.id },
        };
        const id = tx.task(remoteCallDefinition, { background: true, state });
        tx.patch(task, "running", { ...payload, remoteCallId: id, cancelRemoteOnAbort: true });
        return id;
      }, call),
    remoteCall: async (id, call) => {
      const handle = await runtime.conversation(runtime.conversationId, call);
      const view = handle === undefined ? undefined : await readRemoteCall(handle.harness, id, call);
      if (view === undefined) throw new PicoError("not_found", `remote call ${id} does not exist`);
      return view;
    },
    taskId: runtime.taskId,
    conversationId: runtime.conversationId,
    budgetMs,
    env: runtime.env,
    now: () => runtime.now(),
    commit: (plan, call) => runtime.commit(plan, call),
    conversation: (id, call) => runtime.conversation(id, call),
    abortTask: (id, call) => runtime.abortTask(id, call),
    markIfLive: (ids, call) => runtime.markIfLive(ids, call),
    waitForTask: (id, options, call) => runtime.waitForTask(id, options, call),
  };
}

/**
 * Cleanup's cancellation request (§6.3): mark the live foreground tasks of the conversations this task
 * owns with mark-if-live (an already-terminal child is finished cleanup). Child queues are untouched;
 * each child task's own abort handler cleans up further down.
 */
async function markOwnedChildren(task: Task, runtime: TaskRuntime, call: Call): Promise<Id[]> {
  const owns = task.owns ?? [];
  if (owns.length === 0) return [];
  const handle = await runtime.conversation(task.conversationId, call);
  if (handle === undefined) return [];
  const storage = handle.harness.storage;
  const ids: Id[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanTasks({
      conversationIds: owns,
      live: true,
      limit: 1000,
      ...(after === undefined ? {} : { after }),
    });
    for (const t of page.items) if (t.background !== true) ids.push(t.id);
    if (page.next === undefined) break;
    after = page.next;
  }
  return ids.length === 0 ? [] : runtime.markIfLive(ids, call);
}

/** The pending items a running call consumed before it ran. */
function resolvedOf(state: { readonly resolved?: readonly PendingResolution[] }): SettleExtras {
  return state.resolved === undefined ? {} : { resolved: state.resolved };
}

function diag(severity: ToolDiag["severity"], message: string, code: string): ToolDiag {
  return { severity, message, code };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Is this the invocation's cancellation (mark or close), rather than an ordinary failure? */
function isCancellation(error: unknown, call: Call): boolean {
  return isInvocationCancellation(error, call.abortSignal);
}
