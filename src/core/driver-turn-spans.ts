/**
 * The `invoke_agent` span of a turn (§6.5, GenAI conventions in telemetry-genai.ts): a conversation's
 * turn is the stretch in which it has live turn tasks (§5.8's inTurn: generation, tool, post_tools,
 * collapse). The first invocation of a turn task in a conversation without an open turn span starts one;
 * every invocation span of its turn tasks is its child; it ends after an invocation completes and leaves
 * the conversation with no live turn task, or when the session stops running (closing, closed, faulted).
 * Spans live in memory only: a turn that outlives its object instance (an eviction, a deploy) continues
 * under a new `invoke_agent` span in the next instance.
 *
 * A turn of a conversation owned by a task (a subagent's child, §8.5) that starts while an invocation of
 * its owner runs is a child of that invocation's span (the tool call running `subagent`): one trace from
 * the parent's turn down through the child's invocations and model calls. A turn that starts with no
 * invocation of its owner running (a later `send` to a spawned child) is a root of its own.
 */
import type { Id } from "../storage/records.js";
import type { DriverState } from "./driver-state.js";
import type { Invocation } from "./driver-types.js";
import { AGENT_NAME, GenAiAttr, INVOKE_AGENT_SPAN } from "./telemetry-genai.js";
import { noopTracer, type Span } from "./telemetry.js";

/** The conversation id spans carry: the session's incarnation and the conversation (unique for its life). */
export function conversationKey(s: DriverState, conversationId: Id): string | undefined {
  const incarnation = s.host.telemetry?.incarnation?.();
  return incarnation === undefined ? undefined : `${incarnation}:${conversationId}`;
}

/** The open turn span of the invocation's conversation, started now if needed; none for other tasks. */
export function turnSpanOf(s: DriverState, inv: Invocation): Span | undefined {
  if (inv.task.turn !== true) return undefined;
  const open = s.turnSpans.get(inv.conversationId);
  if (open !== undefined) return open;
  const telemetry = s.host.telemetry;
  const key = conversationKey(s, inv.conversationId);
  const owner = s.links.get(inv.conversationId)?.owner;
  const parent = owner === undefined ? undefined : s.invocationSpans.get(owner);
  let span: Span;
  try {
    span = (telemetry?.tracer ?? noopTracer).startSpan(
      INVOKE_AGENT_SPAN,
      {
        [GenAiAttr.operationName]: "invoke_agent",
        [GenAiAttr.agentName]: AGENT_NAME,
        ...(key === undefined ? {} : { [GenAiAttr.conversationId]: key }),
        ...(telemetry?.session === undefined ? {} : { "pico.session": telemetry.session }),
        "pico.conversation": inv.conversationId,
      },
      parent,
    );
  } catch (error) {
    s.session.report({ type: "listener_error", error });
    return undefined;
  }
  s.turnSpans.set(inv.conversationId, span);
  return span;
}

/**
 * After an invocation of the conversation completed: end its turn span when the turn is over (no live
 * turn task) or the session no longer runs; status error when the session fail-stopped.
 */
export function endTurnIfOver(s: DriverState, conversationId: Id): void {
  const span = s.turnSpans.get(conversationId);
  if (span === undefined) return;
  const running = s.phase === "open" || s.phase === "stopping";
  if (running && s.liveTurnTasks(conversationId) > 0) return;
  s.turnSpans.delete(conversationId);
  try {
    span.setAttribute("pico.phase", s.phase);
    if (s.phase === "faulted") span.setStatus("error", "the session fail-stopped");
    else span.setStatus("ok");
    span.end();
  } catch (error) {
    s.session.report({ type: "listener_error", error });
  }
}
