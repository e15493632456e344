/**
 * The built-in `subagent` tool (§8.5): a subagent is a conversation owned by a tool call; there is no
 * subagent task and no registry. The argument is exactly `SubagentCommand`:
 *
 *   run     one creation commit (the child, owned by this tool task; its initial values; the prompt
 *           accepted -> inputId; its first generation), drive the child with the call, then the tool
 *           kind's one settlement commit (result entry + settle). Recover: the creation is found again
 *           by its request key (§3.4), so the child is driven again with the fresh Call. Abort: the tool
 *           kind marks the child's live foreground tasks only (its queues stay) and writes its own error
 *           result (src/kinds/tool.ts). The public abort of the parent conversation (§6.3) also withdraws
 *           the child's queued steer/followUp in its marking commit (the child is in its closure).
 *   spawn   the same creation commit; the call settles at once with the child's id, so the child's
 *           owner is terminal: it is not in the parent's foreground set and aborting the parent leaves it
 *           alone; `stop` cancels it.
 *   send    child.accept({ input: text }): queued (followUp) if the child is busy, placed if idle.
 *   status  the child's tail (last entries) and its live tasks.
 *   wait    drive the child, then the result of its last input. Recover: drive again.
 *
 * `run` and `wait` drive the child with the blocking budget (§8.3, `runtime.budgetMs`): when it runs
 * out, the call settles now with the child's id (`out.delegate` and an info diag "still running as
 * subagent N"; `details.inputId` names the input it waited for), the child runs on owned by the
 * now-terminal call (like a spawned child), a later `wait` returns its answer, and the commit that
 * resolves that input appends one notice to the parent (src/kinds/subagent-notice.ts, §8.3, §8.6).
 *   stop    child.abort(call) (§6.3).
 *
 * The child inherits the parent's model and thinking, the blocking budget this call runs with (the
 * generation's captured one), and the parent's selected tools unless `tools` narrows them; a tool the parent has not
 * selected is refused (never widened). `context: "inherit"`
 * starts the child from the parent's context at the last complete exchange before the launching one:
 * the prefix before the first entry of the input group whose generation made this call (§8.1). Ids are
 * resolved with runtime.conversation(id); a conversation this conversation's tasks do not own (directly
 * or further down the ownership tree) is refused.
 *
 * The tool is `replay: "safe"`: every command is idempotent under a restart — creation and `send` carry
 * the request key `subagent:<tool task id>`, so running the call again finds what the first run did.
 */
import type { Call } from "../core/call.js";
import type { ConversationHandle } from "../core/conversation.js";
import { bindInbox, bindResult, requestKey, type InputResult } from "../core/inbox.js";
import { generationConfig } from "../kinds/config.js";
import { entryText } from "../kinds/subagent-notice.js";
import type { Tool, ToolOutput, ToolRuntime } from "../kinds/services.js";
import { toolDefinition } from "../kinds/tool.js";
import type { Entry, Id, JsonObject, JsonValue } from "../storage/records.js";

/** The tool's argument (§8.5), exactly the spec's union. */
export type SubagentCommand =
  | { command: "run"; prompt: string; context?: "fresh" | "inherit"; tools?: string[] }
  | { command: "spawn"; prompt: string; context?: "fresh" | "inherit"; tools?: string[] }
  | { command: "send"; id: Id; text: string }
  | { command: "status"; id: Id }
  | { command: "wait"; id: Id }
  | { command: "stop"; id: Id };

/** How many entries `status` shows from the child's tail. */
const STATUS_TAIL = 5;
/** Characters of one entry's text `status` shows. */
const STATUS_TEXT_CHARS = 200;

export const subagentTool: Tool = {
  name: "subagent",
  description:
    'Delegate to a subagent: a child conversation with your model and (a subset of) your tools. run: give it a prompt and wait for its answer. spawn: start it in the background and get its id; then send (more input), status, wait (its answer to the last input) or stop it by id. context "inherit" lets it see this conversation so far; "fresh" (default) starts empty.',
  parameters: {
    type: "object",
    properties: {
      command: { type: "string", enum: ["run", "spawn", "send", "status", "wait", "stop"], description: "What to do." },
      prompt: { type: "string", minLength: 1, description: "run/spawn: the subagent's task." },
      context: {
        type: "string",
        enum: ["fresh", "inherit"],
        description: "run/spawn: start empty (default) or from this conversation's context.",
      },
      tools: {
        type: "array",
        items: { type: "string" },
        description: "run/spawn: the subagent's tools, a subset of yours (default: all of yours).",
      },
      id: {
        type: "integer",
        minimum: 1,
        description: "send/status/wait/stop: the subagent's id (what spawn returned).",
      },
      text: { type: "string", minLength: 1, description: "send: the input for the subagent." },
    },
    required: ["command"],
    additionalProperties: false,
  },
  replay: "safe",
  async execute(_toolCallId, params, out, runtime, call) {
    const command = parseSubagentCommand(params);
    switch (command.command) {
      case "run":
      case "spawn":
        return launch(command, out, runtime, call);
      case "send":
        return send(command, out, runtime, call);
      case "status":
        return status(command.id, out, runtime, call);
      case "wait":
        return wait(command.id, out, runtime, call);
      case "stop":
        return stop(command.id, out, runtime, call);
      default: {
        const never: never = command;
        throw new Error(`unknown subagent command ${JSON.stringify(never)}`);
      }
    }
  },
};

// ---------------------------------------------------------------------------------------------
// input

const FIELDS: Record<
  SubagentCommand["command"],
  { readonly required: readonly string[]; readonly optional: readonly string[] }
> = {
  run: { required: ["prompt"], optional: ["context", "tools"] },
  spawn: { required: ["prompt"], optional: ["context", "tools"] },
  send: { required: ["id", "text"], optional: [] },
  status: { required: ["id"], optional: [] },
  wait: { required: ["id"], optional: [] },
  stop: { required: ["id"], optional: [] },
};

/**
 * The arguments as a `SubagentCommand`, or an Error naming the field (the tool kind turns it into the
 * call's error result; nothing is written). Each command takes exactly its own fields.
 */
export function parseSubagentCommand(args: JsonObject): SubagentCommand {
  const command = args["command"];
  if (typeof command !== "string" || !Object.hasOwn(FIELDS, command)) {
    throw new Error(
      `command must be one of run, spawn, send, status, wait, stop; got ${JSON.stringify(command ?? null)}`,
    );
  }
  const name = command as SubagentCommand["command"];
  const fields = FIELDS[name];
  for (const key of Object.keys(args)) {
    if (key !== "command" && !fields.required.includes(key) && !fields.optional.includes(key))
      throw new Error(`${name} takes no ${key}`);
  }
  for (const key of fields.required) if (args[key] === undefined) throw new Error(`${name} needs ${key}`);
  switch (name) {
    case "run":
    case "spawn": {
      const prompt = args["prompt"];
      if (typeof prompt !== "string" || prompt.trim() === "")
        throw new Error(`${name}: prompt must be a non-empty string`);
      const context = args["context"];
      if (context !== undefined && context !== "fresh" && context !== "inherit")
        throw new Error(`${name}: context must be "fresh" or "inherit"`);
      const tools = args["tools"];
      if (
        tools !== undefined &&
        (!Array.isArray(tools) || !tools.every((t): t is string => typeof t === "string" && t !== ""))
      ) {
        throw new Error(`${name}: tools must be a list of tool names`);
      }
      return {
        command: name,
        prompt,
        ...(context === undefined ? {} : { context }),
        ...(tools === undefined ? {} : { tools: [...new Set(tools)] }),
      };
    }
    case "send": {
      const text = args["text"];
      if (typeof text !== "string" || text.trim() === "") throw new Error("send: text must be a non-empty string");
      return { command: name, id: idOf(args), text };
    }
    case "status":
    case "wait":
    case "stop":
      return { command: name, id: idOf(args) };
    default: {
      const never: never = name;
      throw new Error(`unknown subagent command ${String(never)}`);
    }
  }
}

function idOf(args: JsonObject): Id {
  const id = args["id"];
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id <= 0)
    throw new Error(`id must be a subagent id (a positive integer), got ${JSON.stringify(id ?? null)}`);
  return id;
}

/** The request key of what this tool call accepts (§3.4): a re-run of the call finds it again. */
export function subagentRequestKey(toolTaskId: Id): string {
  return `subagent:${toolTaskId}`;
}

// ---------------------------------------------------------------------------------------------
// run / spawn

async function launch(
  command: Extract<SubagentCommand, { command: "run" | "spawn" }>,
  out: ToolOutput,
  runtime: ToolRuntime,
  call: Call,
): Promise<void> {
  const parent = await runtime.conversation(runtime.conversationId, call);
  if (parent === undefined) throw new Error(`conversation ${runtime.conversationId} does not exist`);
  const selected = (await parent.value(generationConfig.selectedTools).get(call)) ?? [];
  const refused = (command.tools ?? []).filter((name) => !selected.includes(name));
  if (refused.length > 0) {
    throw new Error(
      `a subagent's tools narrow yours and never widen them: ${refused.join(", ")} ${refused.length === 1 ? "is" : "are"} not selected here (selected: ${selected.length === 0 ? "none" : selected.join(", ")})`,
    );
  }
  const tools = command.tools ?? selected;
  const requestId = subagentRequestKey(runtime.taskId);
  const launched = await runtime.commit(async (tx) => {
    // Recovery (§8.5): the child exists when the creation commit landed before the restart.
    const prior = await tx.builder.value(requestKey(requestId)).get();
    if (prior !== undefined) return { conversationId: prior.conversationId, inputId: prior.inputId, created: false };
    const me = await tx.getTask(toolDefinition, runtime.taskId);
    if (me === undefined || me.state.status === "orphaned") throw new Error(`tool task ${runtime.taskId} is missing`);
    const at = command.context === "inherit" ? await inheritPoint(parent, me.state.assistant, call) : undefined;
    const spawned = await parent.spawnIn(tx.builder, {
      prompt: command.prompt,
      requestId,
      ...(at === undefined ? {} : { context: { at } }),
      // The child inherits the blocking budget this call runs with (the generation's captured one, §8.3).
      values: {
        inherit: [generationConfig.model, generationConfig.thinking],
        set: [
          [generationConfig.selectedTools, [...tools]],
          [generationConfig.budgetMs, runtime.budgetMs],
        ],
      },
    });
    return { conversationId: spawned.conversationId, inputId: spawned.inputId, created: true };
  }, call);
  const id = launched.conversationId;
  const details: Record<string, JsonValue> = {
    id,
    inputId: launched.inputId,
    command: command.command,
    context: command.context ?? "fresh",
    tools: [...tools],
  };
  if (command.command === "spawn") {
    out.details = { ...details, status: "spawned" };
    out.write(`spawned subagent ${id}; use subagent status / send / wait / stop with id ${id}`);
    return;
  }
  const child = await resolve(runtime, id, call);
  // Cancelling the call cancels this waiter, not the child (§6.2); abort cleanup is the tool kind's.
  // The wait has the blocking budget (§8.3): past it, the call settles and the child runs on.
  const driven = await child.driveWithin(runtime.budgetMs, call);
  if (driven === "closed") throw new Error(`the session closed while subagent ${id} was running`);
  if (driven === "budget") return delegate(child.id, launched.inputId, details, out, runtime);
  await answer(child, launched.inputId, details, out, call);
}

/**
 * The blocking budget ran out (§8.3): the call settles now with what it has, `out.delegate` names the
 * child and an info diag says how to follow it. The tool kind's settlement makes this call terminal, so
 * from that commit on the child's owner is a terminal task, exactly like a spawned child: aborting the
 * parent leaves it alone, `stop` cancels it, and a later `wait` returns its answer. Until that commit
 * lands the call is still running and an abort of it marks the child (the tool kind's abort).
 */
function delegate(
  id: Id,
  inputId: Id,
  details: Record<string, JsonValue>,
  out: ToolOutput,
  runtime: ToolRuntime,
): void {
  out.details = { ...details, id, inputId, status: "running" };
  out.write(
    `subagent ${id} is still working on input ${inputId} after ${runtime.budgetMs} ms; its answer is not in yet`,
  );
  out.delegate(id);
  out.diag("info", `still running as subagent ${id}; use subagent wait / status / stop`, "budget");
}

/**
 * Where an inheriting child's context ends (§8.5): the parent's context at the last complete exchange
 * before the launching one, i.e. through the newest entry before the first entry of the input group
 * whose generation wrote the launching assistant message. 0 (an empty prefix) when there is none.
 */
export async function inheritPoint(parent: ConversationHandle, assistant: Id, call: Call): Promise<Id> {
  const harness = parent.harness;
  const entry = await harness.getEntry(assistant, call);
  let start = assistant;
  const generation = entry?.byTaskId === undefined ? undefined : await harness.getTask(entry.byTaskId, call);
  const inputs = (generation?.state as { inputs?: unknown } | undefined)?.inputs;
  if (Array.isArray(inputs)) {
    for (const inputId of inputs) {
      if (typeof inputId !== "number") continue;
      const result = (await harness.storage.getValue(bindResult(parent.id, inputId)))?.value;
      const placed = result === undefined || result.status === "queued" ? undefined : result.entry;
      if (placed !== undefined && placed < start) start = placed;
    }
  }
  const before = await harness.storage.scanEntries({ conversationId: parent.id, before: start, limit: 1 });
  return before.items[0]?.id ?? 0;
}

// ---------------------------------------------------------------------------------------------
// send / status / wait / stop

async function send(
  command: Extract<SubagentCommand, { command: "send" }>,
  out: ToolOutput,
  runtime: ToolRuntime,
  call: Call,
): Promise<void> {
  const child = await resolve(runtime, command.id, call);
  const receipt = await child.accept({ input: command.text, requestId: subagentRequestKey(runtime.taskId) }, call);
  const result = await child.result(receipt.inputId, call);
  out.details = { id: child.id, inputId: receipt.inputId, status: result?.status ?? "queued" };
  out.write(
    result?.status === "queued"
      ? `sent to subagent ${child.id} (input ${receipt.inputId}, queued: it is busy and takes it after its current work)`
      : `sent to subagent ${child.id} (input ${receipt.inputId}, ${result?.status ?? "accepted"})`,
  );
}

async function status(id: Id, out: ToolOutput, runtime: ToolRuntime, call: Call): Promise<void> {
  const child = await resolve(runtime, id, call);
  const storage = child.harness.storage;
  const live = (await storage.scanTasks({ conversationIds: [child.id], live: true, limit: 100 })).items;
  const tail = (
    await storage.scanEntries({ conversationId: child.id, before: Number.MAX_SAFE_INTEGER, limit: STATUS_TAIL })
  ).items;
  const last = await lastInput(child);
  const busy = live.some((task) => task.background !== true);
  out.details = {
    id: child.id,
    busy,
    tasks: live.map((task) => ({ id: task.id, kind: task.kind, status: String(task.state["status"]) })),
    tail: tail.map((entry) => ({ id: entry.id, kind: entry.kind })),
    ...(last === undefined ? {} : { lastInput: { id: last.inputId, status: last.result.status } }),
  };
  const lines = [`subagent ${child.id}: ${busy ? "busy" : "idle"}`];
  lines.push(
    live.length === 0
      ? "live tasks: none"
      : `live tasks: ${live.map((task) => `${task.kind} ${task.id} (${String(task.state["status"])})`).join(", ")}`,
  );
  if (last !== undefined) lines.push(`last input ${last.inputId}: ${last.result.status}`);
  lines.push(tail.length === 0 ? "no entries yet" : "last entries:");
  for (const entry of tail) lines.push(`  ${entry.id} ${entry.kind}: ${clip(entryText(entry))}`);
  out.write(lines.join("\n"));
}

async function wait(id: Id, out: ToolOutput, runtime: ToolRuntime, call: Call): Promise<void> {
  const child = await resolve(runtime, id, call);
  const driven = await child.driveWithin(runtime.budgetMs, call);
  if (driven === "closed") throw new Error(`the session closed while waiting for subagent ${child.id}`);
  const last = await lastInput(child);
  if (last === undefined) throw new Error(`subagent ${child.id} has no input to wait for`);
  const details = { id: child.id, inputId: last.inputId, command: "wait" };
  if (driven === "budget") return delegate(child.id, last.inputId, details, out, runtime);
  await answer(child, last.inputId, details, out, call);
}

async function stop(id: Id, out: ToolOutput, runtime: ToolRuntime, call: Call): Promise<void> {
  const child = await resolve(runtime, id, call);
  await child.abort(call);
  out.details = { id: child.id, status: "stop requested" };
  out.write(`subagent ${child.id}: stop requested (its running work is aborted; queued follow-ups are withdrawn)`);
}

// ---------------------------------------------------------------------------------------------
// helpers

/**
 * The child by id, through the runtime (no registry, §8.5). Refused unless a task of this conversation
 * owns it, directly or further down its ownership tree (§5.7).
 */
async function resolve(runtime: ToolRuntime, id: Id, call: Call): Promise<ConversationHandle> {
  const child = await runtime.conversation(id, call);
  if (child === undefined) throw new Error(`subagent ${id} does not exist`);
  const storage = child.harness.storage;
  const seen = new Set<Id>();
  for (let conversation = child.record; conversation.owner !== undefined && !seen.has(conversation.id);) {
    seen.add(conversation.id);
    const owner = (await storage.getTasks([conversation.owner])).get(conversation.owner);
    if (owner === undefined) break;
    if (owner.conversationId === runtime.conversationId) return child;
    const up = (await storage.getConversations([owner.conversationId])).get(owner.conversationId);
    if (up === undefined) break;
    conversation = up;
  }
  throw new Error(`conversation ${id} is not a subagent of this conversation (no task here owns it)`);
}

/**
 * The child's newest input and its result, with bounded reads (§6.2), however many inputs it has had:
 * the newest element of its inbox (a queued input) and the input group of its newest generation (the
 * placed ones; a group's later inputs join the generation that answers them), then one point read of
 * that input's result.
 */
async function lastInput(child: ConversationHandle): Promise<{ inputId: Id; result: InputResult } | undefined> {
  const storage = child.harness.storage;
  const [queued, generations] = await Promise.all([
    storage.readList(bindInbox(child.id), { before: Number.MAX_SAFE_INTEGER, limit: 1 }),
    storage.scanTasks({ conversationIds: [child.id], kind: "generation", before: Number.MAX_SAFE_INTEGER, limit: 1 }),
  ]);
  let newest: Id | undefined;
  const consider = (id: unknown): void => {
    if (typeof id === "number" && Number.isSafeInteger(id) && (newest === undefined || id > newest)) newest = id;
  };
  for (const element of queued.items) consider(element.id);
  for (const task of generations.items) {
    const inputs = task.state["inputs"];
    if (Array.isArray(inputs)) for (const id of inputs) consider(id);
  }
  if (newest === undefined) return undefined;
  const result = (await storage.getValue(bindResult(child.id, newest)))?.value;
  return result === undefined ? undefined : { inputId: newest, result };
}

/** After a drive: the input's answer as this call's result, or an error naming why there is none. */
async function answer(
  child: ConversationHandle,
  inputId: Id,
  details: Record<string, JsonValue>,
  out: ToolOutput,
  call: Call,
): Promise<void> {
  const result = await child.result(inputId, call);
  out.details = { ...details, status: result?.status ?? "unknown" };
  switch (result?.status) {
    case "done": {
      const entry = result.answer === undefined ? undefined : await child.harness.getEntry(result.answer, call);
      out.write(entry === undefined ? `subagent ${child.id} finished without an answer` : entryText(entry));
      return;
    }
    case "unanswered":
      throw new Error(
        `subagent ${child.id} did not answer input ${inputId}: ${result.reason}${result.detail === undefined ? "" : ` (${result.detail})`}`,
      );
    case "queued":
    case "placed":
    case undefined:
      // The drive returned idle with the input still waiting: a group that ended without an answer
      // leaves queued follow-ups waiting (§6.4: no work by inference).
      throw new Error(
        `subagent ${child.id} went idle with input ${inputId} ${result?.status ?? "unknown"}; send it more input or check its status`,
      );
    default: {
      const never: never = result;
      throw new Error(`unknown input result ${JSON.stringify(never)}`);
    }
  }
}

function clip(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= STATUS_TEXT_CHARS ? line : `${line.slice(0, STATUS_TEXT_CHARS)}…`;
}
