/**
 * The built-in post_tools task kind (§5.5, §8.3): created by a generation with calls, after: its tool
 * tasks, owning the input group. It starts once every tool is terminal, reads them with the typed
 * getter, narrows on their status and decides what happens next, in one commit:
 *
 *   orphaned tool (kind unregistered at open)  -> write an unavailable-tool result for its call
 *   any outcome terminates                     -> group unanswered(terminated), safe writes placed; settle stopped
 *   conflicting handoffs (different messages)  -> group unanswered(failed); settle stopped ("reject rather than pick an
 *   order")
 *   no model configured any more               -> group unanswered(failed); settle stopped (a domain outcome, not a
 *   fault)
 *   otherwise: added tools -> selected tools (rewindable config, written before every entry, §3.2);
 *              handoff -> a handoff head after the exchange; place writes and steering (the group grows);
 *              create the continuation generation (config captured on the line); settle done { successor }
 *
 * abort resolves the group unanswered(aborted) and settles aborted with no successor. The runtime
 * rejects a marked execute commit before its builder runs, so the normal path needs no mark check.
 */
import { handoffEntry, handoffKind, toolResultEntry, toolResultKind } from "../core/entries.js";
import { PicoError } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import { bindTo } from "../core/state.js";
import { defineTaskKind } from "../core/task-kind.js";
import { conversationTx, type ConversationTx } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { captureConfig, freshRetry, generationConfig } from "./config.js";
import { createGeneration, landPostToolsInbox, resolveUnanswered } from "./placement.js";
import { withRunTools } from "./run-tools.js";
import type { TurnServices } from "./services.js";
import {
  postToolsRoles,
  type CapturedConfig,
  type PostToolsState,
  type ToolResultData,
  type ToolStates,
} from "./states.js";
import { compactToolData, readToolData } from "./stored.js";
import { errorOutput, resultMessage, toolDefinition } from "./tool.js";

export function createPostToolsKind(services: TurnServices) {
  const kind = defineTaskKind<PostToolsState, TaskRuntime>()({
    kind: "post_tools",
    roles: postToolsRoles,
    initialStatus: "waiting",
    turn: true,

    async execute(task, runtime, call) {
      if (task.state.status !== "waiting")
        throw new PicoError("contract", `post_tools ${task.id} executes only from waiting, not ${task.state.status}`);
      const { assistant, tools, inputs, runTools } = task.state;
      const conversationId = task.conversationId;
      await runtime.commitBuilder(async (b) => {
        const tx = conversationTx(b, conversationId);
        const { outcomes, orphaned } = await readTools(tx, task.id, tools);
        const writeOrphans = (): void => {
          for (const toolCall of orphaned) {
            const output = errorOutput(
              `Tool "${toolCall.name}" is unavailable: its task kind was not registered when the session reopened.`,
              "unavailable",
            );
            const { content: _content, ...data } = output;
            tx.entry(
              toolResultKind,
              toolResultEntry(resultMessage(toolCall, output, runtime.now()), compactToolData(data)),
            );
          }
        };

        if (outcomes.some((o) => o.terminate)) {
          writeOrphans();
          await resolveUnanswered(b, conversationId, inputs, "terminated", { placeWrites: true });
          tx.settle(task, "stopped", { assistant, tools, inputs });
          return;
        }
        const handoffs = [...new Set(outcomes.flatMap((o) => (o.handoff === null ? [] : [o.handoff])))];
        if (handoffs.length > 1) {
          writeOrphans();
          await resolveUnanswered(b, conversationId, inputs, "failed", {
            detail: `conflicting handoffs in one turn (${handoffs.length} different messages); none was applied`,
            placeWrites: true,
          });
          tx.settle(task, "stopped", { assistant, tools, inputs });
          return;
        }
        let config: CapturedConfig;
        try {
          config = await captureConfig(b, conversationId, services.options);
        } catch (error) {
          // Configuration removed mid-turn: the group cannot continue; a domain outcome, not a fault.
          if (!(error instanceof PicoError) || error.code !== "invalid_commit") throw error;
          writeOrphans();
          await resolveUnanswered(b, conversationId, inputs, "failed", { detail: error.message, placeWrites: true });
          tx.settle(task, "stopped", { assistant, tools, inputs });
          return;
        }

        // Rewindable conversation state first (§3.2): a fork at any entry below sees the new loadout.
        const added = outcomes.flatMap((o) => o.addedTools ?? []);
        // captureConfig read the committed selection; this commit's write is not visible to reads.
        const fresh = [...new Set(added)].filter((name) => !config.tools.includes(name));
        const selected = [...config.tools, ...fresh];
        if (fresh.length > 0) b.value(bindTo(generationConfig.selectedTools, conversationId)).set(selected);
        writeOrphans();
        const handoff = handoffs[0];
        // After the exchange is complete, never inside a tool: a head mid-exchange would cut it in half (§8.3).
        if (handoff !== undefined) tx.entry(handoffKind, handoffEntry(handoff, runtime.now()));
        const group = await landPostToolsInbox(b, conversationId, inputs, runtime.now());
        const successor = createGeneration(
          b,
          conversationId,
          group,
          withRunTools({ ...config, tools: selected }, runTools),
          freshRetry(services.options),
        );
        tx.settle(task, "done", { assistant, tools, inputs: group, successor });
      }, call);
    },

    async recover(task, _runtime, _call) {
      // post_tools has no inflight status; the driver never recovers it.
      throw new PicoError(
        "contract",
        `post_tools ${task.id} has no inflight status to recover from (${task.state.status})`,
      );
    },

    async abort(task, runtime, call) {
      const { assistant, tools, inputs } = task.state;
      await runtime.commitBuilder(async (b) => {
        const tx = conversationTx(b, task.conversationId);
        await resolveUnanswered(b, task.conversationId, inputs, "aborted");
        tx.settle(task, "aborted", { assistant, tools, inputs });
      }, call);
    },
  });
  return kind;
}

/** The tool tasks in call order: terminal outcomes, and the calls of orphaned ones. A live tool is a contract error. */
async function readTools(
  tx: ConversationTx,
  postTools: Id,
  ids: readonly Id[],
): Promise<{ outcomes: ToolResultData[]; orphaned: ToolCallState[] }> {
  const tools = await tx.getTasks(toolDefinition, ids);
  const outcomes: ToolResultData[] = [];
  const orphaned: ToolCallState[] = [];
  for (const id of ids) {
    const t = tools.get(id);
    if (t === undefined)
      throw new PicoError("contract", `post_tools ${postTools}: tool task ${id} is missing or not a tool`);
    const state = t.state;
    switch (state.status) {
      case "done":
      case "aborted":
        outcomes.push(readToolData(state.output)); // both wrote their result entry
        break;
      case "orphaned":
        orphaned.push(state.call);
        break;
      case "planned":
      case "parked":
      case "running":
        throw new PicoError(
          "contract",
          `post_tools ${postTools}: tool ${id} is still live (${state.status}); dependencies mean terminal (§5.4)`,
        );
      default: {
        const never: never = state;
        throw new PicoError(
          "contract",
          `post_tools ${postTools}: tool ${id} has unknown status ${JSON.stringify(never)}`,
        );
      }
    }
  }
  return { outcomes, orphaned };
}

type ToolCallState = ToolStates["call"];
