/**
 * The pending list inside the session Durable Object (docs/api.md "Pending"): the operations behind
 * `GET /v1/sessions/{session}/pending`, `GET .../conversations/{conversation}/pending` and
 * `POST .../pending/{id}`. The list is the sticky `pi.pending` values (src/kinds/pending-types.ts) the
 * waiting tool tasks write; an answer is recorded as the task's sticky `pico.wait` answer with
 * `harness.answer` (the route never patches a task, §6.1), and the task consumes it in its own commit.
 *
 * A refused answer writes nothing: an answer already recorded (`already_answered`, with that answer),
 * an item whose call was aborted or timed out (`pending_closed`, with how), an unknown item
 * (`pending_not_found`). A consumed item is looked up in its task's `resolved` list (the id names the
 * task), so a late answer is refused with what happened, not as unknown. The id also names the session's
 * incarnation (src/kinds/incarnation.ts): an id of a deleted incarnation is unknown to the new one.
 */
import { AnswerRefused } from "../../core/answers.js";
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import { bind, bindTo } from "../../core/state.js";
import { answerFits } from "../../kinds/pending.js";
import {
  parsePendingId,
  pendingAll,
  pendingHere,
  type PendingItem,
  type PendingResolution,
} from "../../kinds/pending-types.js";
import type { JsonValue } from "../../storage/records.js";
import { Problem } from "../problems.js";
import type { ConversationRef, SessionApi } from "./api.js";

/** What an accepted answer returns. */
export interface PendingAnswered {
  readonly id: string;
  readonly answer: JsonValue;
  readonly at: number;
}

/** The pending operations of the session's op table (session/ops.ts): arguments and results. */
export interface PendingSessionOps {
  /** The session's items, or one conversation's. */
  pending: { readonly args: [conversation: ConversationRef | null]; readonly result: PendingItem[] };
  answerPending: { readonly args: [id: string, answer: JsonValue]; readonly result: PendingAnswered };
}

const call: Call = BACKGROUND_CONTEXT;

async function list(api: SessionApi, ref: ConversationRef | null): Promise<PendingItem[]> {
  if (ref === null) return (await api.harness.storage.getValue(bind(pendingAll, {})))?.value ?? [];
  const handle = await api.conversation(ref);
  return (await api.harness.storage.getValue(bindTo(pendingHere, handle.id)))?.value ?? [];
}

function notFound(id: string): Problem {
  return new Problem("pending_not_found", `nothing is pending under ${id}`, "id");
}

/** A consumed item's refusal, from the resolution its task recorded; undefined when it has none. */
function closed(id: string, resolution: PendingResolution | undefined): Problem | undefined {
  if (resolution === undefined) return undefined;
  if (resolution.outcome === "answered") {
    return new Problem(
      "already_answered",
      `${id} was already answered`,
      undefined,
      resolution.answer === undefined ? {} : { answer: resolution.answer },
    );
  }
  return new Problem(
    "pending_closed",
    `${id} is closed: ${resolution.outcome === "timeout" ? "its deadline passed" : "its call was aborted"}`,
    undefined,
    { outcome: resolution.outcome },
  );
}

async function answer(
  api: SessionApi,
  incarnation: string | undefined,
  id: string,
  value: JsonValue,
): Promise<PendingAnswered> {
  const parsed = parsePendingId(id);
  // An id of another incarnation (the session was deleted and created again: its task ids started over) names
  // nothing here, whatever its task.
  if (parsed === undefined || parsed.incarnation !== incarnation) throw notFound(id);
  if (!answerFits(parsed.type, value)) {
    throw new Problem(
      "invalid_body",
      parsed.type === "approval"
        ? "an approval is answered with { approve, reason? }"
        : "a client tool is answered with { output, isError? }",
      parsed.type === "approval" ? "approve" : "output",
    );
  }
  try {
    const { at } = await api.harness.answer(parsed.taskId, id, value, call);
    return { id, answer: value, at };
  } catch (error) {
    if (!(error instanceof AnswerRefused)) throw error;
    switch (error.reason) {
      case "answered":
        throw new Problem(
          "already_answered",
          `${id} was already answered`,
          undefined,
          error.current === undefined ? {} : { answer: error.current.value },
        );
      case "aborted":
        throw new Problem("pending_closed", `${id} is closed: its call is being aborted`, undefined, {
          outcome: "aborted",
        });
      case "not_waiting": {
        const task = (await api.harness.storage.getTasks([parsed.taskId])).get(parsed.taskId);
        const resolved =
          task?.kind === "tool" ? (task.state["resolved"] as PendingResolution[] | undefined) : undefined;
        throw (
          closed(
            id,
            resolved?.find((r) => r.id === id),
          ) ?? notFound(id)
        );
      }
      default: {
        const never: never = error.reason;
        throw new Error(`unknown refusal ${String(never)}`);
      }
    }
  }
}

/** The pending entries of the SessionObject's op table, over the open session's SessionApi. */
export function pendingOps<S extends { readonly api: SessionApi; readonly incarnation: string | undefined }>(): {
  readonly [K in keyof PendingSessionOps]: (
    session: S,
    ...args: PendingSessionOps[K]["args"]
  ) => Promise<PendingSessionOps[K]["result"]>;
} {
  return {
    pending: (s, ref) => list(s.api, ref),
    answerPending: (s, id, value) => answer(s.api, s.incarnation, id, value),
  };
}
