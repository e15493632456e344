/**
 * Which lifecycle events a batch reports (docs/integrations.md "Events out"). Each detector reads the
 * batch's own writes and the committed state before it (through the builder), so an event exists
 * exactly when the step it reports commits: no edits to the kinds that write those steps.
 *
 *   input.completed  an input's result becomes done (answered) or unanswered; write-mode inputs (queued
 *                    straight to done) report nothing
 *   turn.failed      the same results with reason "failed", one event per conversation per batch
 *                    (both carry `source` for an input from an inbound delivery: its user entry's data.inbound.source)
 *   session.idle     the batch settles the last live foreground turn task of the session
 *   schedule.fired   a firing schedule occurrence accepted its input (runs went up)
 *   job.finished     a job task settled exited, killed or lost
 *   rig.escalation   the witness mailed the mayor (STALL_ALERT, STALL_CRITICAL, HEALTH, ...)
 *   pending.created  an item joined the session's pending list (an approval, a client tool's call)
 *   pending.resolved an item left it (answered, its deadline passed, or its call was aborted)
 *   session.expired  the session's retention ran out (the batch records its expiry; it is deleted after)
 *
 * `delivery.disabled` is appended by the sender (outbox/sender.ts), never detected.
 */
import type { BatchView } from "../../core/session-types.js";
import type { TxBuilder } from "../../core/tx-builder.js";
import { bindResult, INPUT_RESULT_NAMESPACE, type InputResult } from "../../core/inbox.js";
import type { Entry, Id, JsonObject, JsonValue, MainWrite, Task } from "../../storage/records.js";
import { entryText } from "../../kinds/subagent-notice.js";
import { MAIL_NAMESPACE } from "../../rig/state.js";
import { MAYOR_ID, type StoredMail } from "../../rig/types.js";
import type { EventType } from "../directory/endpoints.js";
import { expiryMark, type ExpiryRecord } from "./types.js";
import { pendingAll, type PendingItem, type PendingResolution } from "../../kinds/pending-types.js";

/** An answer's text in `input.completed` is cut at this many UTF-8 bytes. */
export const EVENT_TEXT_BYTES = 4096;
/** A mail payload in `rig.escalation` is cut at this many UTF-8 bytes. */
export const EVENT_PAYLOAD_BYTES = 1024;

export interface DetectedEvent {
  readonly type: Exclude<EventType, "delivery.disabled">;
  readonly data: JsonObject;
}

/** Cut `text` to at most `bytes` UTF-8 bytes without splitting a character. */
export function cutUtf8(text: string, bytes: number): string {
  const encoded = new TextEncoder().encode(text);
  if (encoded.length <= bytes) return text;
  let end = bytes;
  while (end > 0 && ((encoded[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  return new TextDecoder().decode(encoded.subarray(0, end));
}

/** The events `batch` reports, in a fixed order of types. */
export async function detectEvents(batch: BatchView, b: TxBuilder): Promise<DetectedEvent[]> {
  return [
    ...(await inputEvents(batch.writes, b)),
    ...(await taskEvents(batch.writes, b)),
    ...mailEvents(batch),
    ...(await pendingEvents(batch.writes, b)),
    ...expiryEvents(batch.writes),
  ];
}

function expiryEvents(writes: readonly MainWrite[]): DetectedEvent[] {
  const out: DetectedEvent[] = [];
  for (const write of writes)
    if (write.type === "value.set" && write.addr.namespace === expiryMark.namespace && "session" in write.addr.scope)
      out.push({ type: "session.expired", data: { ...(write.value as unknown as ExpiryRecord) } });
  return out;
}

async function entryInBatch(writes: readonly MainWrite[], b: TxBuilder, id: Id): Promise<Entry | undefined> {
  for (const write of writes) if (write.type === "entry" && write.entry.id === id) return write.entry;
  return b.getEntry(id);
}

/** The `source` an inbound delivery's user entry keeps in its data (inbound/template.ts `inboundData`). */
function inboundSource(entry: Entry | undefined): JsonObject | undefined {
  const data = entry?.data;
  if (data === null || typeof data !== "object" || Array.isArray(data)) return undefined;
  const inbound = (data as JsonObject)["inbound"];
  if (inbound === null || typeof inbound !== "object" || Array.isArray(inbound)) return undefined;
  const source = (inbound as JsonObject)["source"];
  return source !== null && typeof source === "object" && !Array.isArray(source) ? (source as JsonObject) : undefined;
}

async function inputEvents(writes: readonly MainWrite[], b: TxBuilder): Promise<DetectedEvent[]> {
  // The latest result per input in the batch, in first-write order.
  const latest = new Map<string, { conversationId: Id; inputId: Id; result: InputResult }>();
  for (const write of writes) {
    if (
      write.type !== "value.set" ||
      write.addr.namespace !== INPUT_RESULT_NAMESPACE ||
      !("conversation" in write.addr.scope) ||
      write.addr.key === undefined
    )
      continue;
    const conversationId = write.addr.scope.conversation;
    latest.set(`${conversationId}/${write.addr.key}`, {
      conversationId,
      inputId: Number(write.addr.key),
      result: write.value as unknown as InputResult,
    });
  }
  const out: DetectedEvent[] = [];
  const failed = new Map<Id, { inputIds: Id[]; detail?: string; source?: JsonObject }>();
  for (const { conversationId, inputId, result } of latest.values()) {
    if (result.status !== "done" && result.status !== "unanswered") continue;
    const previous = (await b.value(bindResult(conversationId, inputId)).get())?.status;
    if (previous === "done" || previous === "unanswered") continue;
    // A write-mode input goes from queued straight to done: it had no turn and reports nothing.
    if (result.status === "done" && previous !== "placed") continue;
    const data: Record<string, JsonValue> = { conversationId, inputId, status: result.status };
    // An inbound delivery's input: where it came from, so a receiver can answer there with no further call.
    const source = result.entry === undefined ? undefined : inboundSource(await entryInBatch(writes, b, result.entry));
    if (source !== undefined) data["source"] = source;
    if (result.status === "done") {
      if (result.answer !== undefined) {
        data["answerEntryId"] = result.answer;
        const answer = await entryInBatch(writes, b, result.answer);
        data["text"] = cutUtf8(answer === undefined ? "" : entryText(answer), EVENT_TEXT_BYTES);
      }
    } else {
      data["reason"] = result.reason;
      if (result.reason === "failed") {
        const group = failed.get(conversationId) ?? { inputIds: [] };
        group.inputIds.push(inputId);
        if (result.detail !== undefined) group.detail ??= result.detail;
        if (source !== undefined) group.source ??= source;
        failed.set(conversationId, group);
      }
    }
    out.push({ type: "input.completed", data });
  }
  for (const [conversationId, group] of failed) {
    out.push({
      type: "turn.failed",
      data: {
        conversationId,
        inputIds: group.inputIds,
        ...(group.detail === undefined ? {} : { detail: cutUtf8(group.detail, EVENT_PAYLOAD_BYTES) }),
        ...(group.source === undefined ? {} : { source: group.source }),
      },
    });
  }
  return out;
}

const JOB_ENDS: ReadonlySet<string> = new Set(["exited", "killed", "lost"]);

async function taskEvents(writes: readonly MainWrite[], b: TxBuilder): Promise<DetectedEvent[]> {
  const touched = writes.filter(
    (write): write is Extract<MainWrite, { type: "patch" | "settle" }> =>
      write.type === "patch" || write.type === "settle",
  );
  if (touched.length === 0) return [];
  const before = await b.getTasks(touched.map((write) => write.id));
  const out: DetectedEvent[] = [];
  let idleConversation: Id | undefined;
  for (const write of touched) {
    const task = before.get(write.id);
    if (task === undefined) continue;
    if (task.kind === "job" && write.type === "settle" && JOB_ENDS.has(write.state.status)) {
      const exitCode = write.state["exitCode"];
      out.push({
        type: "job.finished",
        data: {
          jobId: task.id,
          conversationId: task.conversationId,
          status: write.state.status,
          ...(typeof exitCode === "number" ? { exitCode } : {}),
        },
      });
    }
    if (task.kind === "schedule" && task.state.status === "firing") {
      const runs = write.state["runs"];
      const previousRuns = task.state["runs"];
      const occurrence = task.state["occurrence"];
      const inputId = write.state["lastInputId"];
      if (typeof runs === "number" && typeof previousRuns === "number" && runs > previousRuns) {
        out.push({
          type: "schedule.fired",
          data: {
            scheduleId: task.id,
            conversationId: task.conversationId,
            ...(typeof occurrence === "number" ? { occurrence } : {}),
            ...(typeof inputId === "number" ? { inputId } : {}),
          },
        });
      }
    }
    if (write.type === "settle" && foregroundTurn(task) && task.role !== "terminal")
      idleConversation = task.conversationId;
  }
  if (idleConversation !== undefined && (await liveForegroundTurnsAfter(writes, b)) === 0) {
    out.push({ type: "session.idle", data: { conversationId: idleConversation } });
  }
  return out;
}

function foregroundTurn(task: Task): boolean {
  return task.turn === true && task.background !== true;
}

/** Live foreground turn tasks once the batch is applied: committed ones it does not settle, plus those it creates. */
async function liveForegroundTurnsAfter(writes: readonly MainWrite[], b: TxBuilder): Promise<number> {
  const settled = new Set(writes.filter((write) => write.type === "settle").map((write) => (write as { id: Id }).id));
  let n = 0;
  for (const write of writes)
    if (write.type === "task" && foregroundTurn(write.task) && write.task.role !== "terminal") n += 1;
  const live = await b.scanTasks({ live: true, limit: 1000 });
  for (const task of live.items) if (foregroundTurn(task) && !settled.has(task.id)) n += 1;
  return n;
}

function mailEvents(batch: BatchView): DetectedEvent[] {
  const out: DetectedEvent[] = [];
  batch.writes.forEach((write, index) => {
    if (write.type !== "list.append" || write.addr.namespace !== MAIL_NAMESPACE || write.addr.key !== MAYOR_ID) return;
    const mail = write.value as unknown as StoredMail;
    if (mail.sender !== "witness") return;
    const payload = typeof mail.payload === "string" ? mail.payload : JSON.stringify(mail.payload);
    const kind = /^[A-Z_]+/.exec(payload)?.[0] ?? "NOTICE";
    out.push({
      type: "rig.escalation",
      data: { kind, mailId: batch.first + index, payload: cutUtf8(payload, EVENT_PAYLOAD_BYTES) },
    });
  });
  return out;
}

/**
 * The session's pending list before and after the batch: an item that appears is `pending.created`, one
 * that goes is `pending.resolved`, with how it went (the resolution its tool task records in the batch).
 */
async function pendingEvents(writes: readonly MainWrite[], b: TxBuilder): Promise<DetectedEvent[]> {
  let after: PendingItem[] | undefined;
  let touched = false;
  for (const write of writes) {
    if (
      (write.type !== "value.set" && write.type !== "value.delete") ||
      write.addr.namespace !== pendingAll.namespace ||
      !("session" in write.addr.scope)
    )
      continue;
    touched = true;
    after = write.type === "value.set" ? (write.value as unknown as PendingItem[]) : [];
  }
  if (!touched) return [];
  const before = (await b.value(pendingAll).get()) ?? [];
  const now = after ?? [];
  const out: DetectedEvent[] = [];
  const summary = (item: PendingItem): JsonObject => ({
    pendingId: item.id,
    type: item.type,
    taskId: item.taskId,
    conversationId: item.conversationId,
    name: item.name,
    ...(item.deadline === undefined ? {} : { deadline: item.deadline }),
  });
  for (const item of now)
    if (!before.some((old) => old.id === item.id)) out.push({ type: "pending.created", data: summary(item) });
  for (const item of before) {
    if (now.some((kept) => kept.id === item.id)) continue;
    const resolution = resolutionIn(writes, item);
    out.push({
      type: "pending.resolved",
      data: { ...summary(item), ...(resolution === undefined ? {} : { outcome: resolution.outcome }) },
    });
  }
  return out;
}

/** The resolution of `item` its tool task records in the batch (patched or settled with `resolved`). */
function resolutionIn(writes: readonly MainWrite[], item: PendingItem): PendingResolution | undefined {
  for (const write of writes) {
    if ((write.type !== "patch" && write.type !== "settle") || write.id !== item.taskId) continue;
    const resolved = write.state["resolved"];
    if (!Array.isArray(resolved)) continue;
    for (const entry of resolved as unknown as PendingResolution[]) if (entry.id === item.id) return entry;
  }
  return undefined;
}
