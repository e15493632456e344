/**
 * The inbox data model (§8.1) and request keys (§3.4). Queued input is the sticky conversation list
 * `pi.inbox`; its element id is the stable inputId, and `inputResult(id)` is the sticky conversation
 * value that says what became of it. A request key maps, in session state, to one acceptance for the
 * life of the session. Placement at turn boundaries (post_tools, final answers) lives with the turn kinds.
 */
import type { Entry, Id, JsonObject, List, Value } from "../storage/records.js";
import type { EntryDraft, UserInput } from "./entries.js";
import { invalid } from "./errors.js";
import {
  bindTo,
  conversationList,
  conversationValue,
  sessionValue,
  withKey,
  type ListSpec,
  type ValueSpec,
} from "./state.js";
import type { TxBuilder } from "./tx-builder.js";

export type InputMode = "steer" | "followUp" | "nextRun" | "write";

/** A queued input; a write carries its entry kind's name and the draft tx.entry would take. */
export type QueuedInput =
  | {
      readonly mode: "steer" | "followUp" | "nextRun";
      readonly input: UserInput;
      readonly requestId?: string;
      /** The id the sender shows this message under (a chat message's id): the user entry's key when placed. */
      readonly messageId?: string;
    }
  | { readonly mode: "write"; readonly kind: string; readonly entry: EntryDraft; readonly requestId?: string };

export type InputResult =
  | { readonly status: "queued"; readonly requestId?: string }
  | { readonly status: "placed"; readonly requestId?: string; readonly entry: Id }
  | { readonly status: "done"; readonly requestId?: string; readonly entry: Id; readonly answer?: Id }
  | {
      readonly status: "unanswered";
      readonly requestId?: string;
      readonly entry?: Id;
      readonly reason: "terminated" | "aborted" | "failed";
      readonly detail?: string;
    };

/** The receipt a request key names (§3.4). */
export interface Acceptance {
  readonly requestId: string;
  readonly conversationId: Id;
  readonly inputId: Id;
}

export const INBOX_NAMESPACE = "pi.inbox";
export const INPUT_RESULT_NAMESPACE = "pi.inputResult";
export const REQUEST_NAMESPACE = "pi.request";

export const inbox: ListSpec<QueuedInput> = conversationList<QueuedInput>(INBOX_NAMESPACE, { rewind: false });

const inputResultBase = conversationValue<InputResult>(INPUT_RESULT_NAMESPACE, { rewind: false });

/** The sticky conversation value for one input's result. */
export function inputResult(inputId: Id): ValueSpec<InputResult> {
  return withKey(inputResultBase, String(inputId));
}

const requestBase = sessionValue<Acceptance>(REQUEST_NAMESPACE);

/** The session value a request key maps to. */
export function requestKey(requestId: string): ValueSpec<Acceptance> {
  return withKey(requestBase, requestId);
}

export function isTerminalResult(result: InputResult | undefined): boolean {
  return result?.status === "done" || result?.status === "unanswered";
}

/** Legal result transitions (§7.3): terminal results never change. */
export function checkResultTransition(inputId: Id, previous: InputResult | undefined, next: InputResult): void {
  const ok = (() => {
    switch (previous?.status) {
      case undefined:
        return (
          next.status === "queued" || next.status === "placed" || next.status === "done" || next.status === "unanswered"
        );
      case "queued":
        return next.status !== "queued";
      case "placed":
        return next.status === "done" || next.status === "unanswered";
      case "done":
      case "unanswered":
        return false;
      default: {
        const never: never = previous;
        return never;
      }
    }
  })();
  if (!ok) {
    throw invalid(
      `input ${inputId}: result ${previous?.status ?? "(none)"} cannot become ${next.status}; terminal results never change (§8.1)`,
    );
  }
}

function withRequest<T extends object>(value: T, requestId: string | undefined): T & { requestId?: string } {
  return requestId === undefined ? value : { ...value, requestId };
}

/**
 * Queue an input in a conversation (inside a builder): append the inbox element and its queued result.
 * Returns the inputId. With a request key, the mapping is written in the same commit; a key that is
 * already mapped rejects on the line, so callers that may retry check `priorAcceptance` first.
 */
export function queueInput(b: TxBuilder, conversationId: Id, input: QueuedInput): Id {
  const inputId = b.list(bindInbox(conversationId)).append(input);
  b.value(bindResult(conversationId, inputId)).set(withRequest({ status: "queued" as const }, input.requestId));
  if (input.requestId !== undefined) {
    b.value(requestKey(input.requestId)).set({ requestId: input.requestId, conversationId, inputId });
  }
  return inputId;
}

/** Look up an earlier acceptance of a request key (committed state). */
export async function priorAcceptance(b: TxBuilder, requestId: string | undefined): Promise<Acceptance | undefined> {
  if (requestId === undefined) return undefined;
  return b.value(requestKey(requestId)).get();
}

/**
 * Place an input as an entry now (§8.1 "Placement"): append its entry, remove the list element and
 * write its result in one commit. A write is placed and done at once, so placed is never observable.
 */
export function placeInput(
  b: TxBuilder,
  conversationId: Id,
  inputId: Id,
  item: QueuedInput,
  entry: EntryDraft & { readonly kind: string },
): Id {
  const keyed = item.mode !== "write" && item.messageId !== undefined ? { ...entry, key: item.messageId } : entry;
  const entryId = b.entry({ kind: entry.kind }, conversationId, keyed);
  b.list(bindInbox(conversationId)).remove(inputId);
  const result: InputResult =
    item.mode === "write"
      ? withRequest({ status: "done" as const, entry: entryId }, item.requestId)
      : withRequest({ status: "placed" as const, entry: entryId }, item.requestId);
  b.value(bindResult(conversationId, inputId)).set(result);
  return entryId;
}

/**
 * tx.write (§5.8): append a model-visible entry now when the conversation has no live turn task,
 * otherwise queue it as a write for the next boundary. Returns the inputId either way.
 */
export function writeEntry(
  b: TxBuilder,
  conversationId: Id,
  kind: string,
  draft: EntryDraft,
  inTurn: boolean,
  requestId?: string,
): Id {
  const item: QueuedInput = withRequest({ mode: "write" as const, kind, entry: draft }, requestId);
  const inputId = queueInput(b, conversationId, item);
  if (!inTurn) placeInputNow(b, conversationId, inputId, item);
  return inputId;
}

/** Place a queued write immediately (idle conversation): entry + remove + done. */
function placeInputNow(
  b: TxBuilder,
  conversationId: Id,
  inputId: Id,
  item: QueuedInput & { readonly mode: "write" },
): void {
  const entryId = b.entry({ kind: item.kind }, conversationId, item.entry);
  b.list(bindInbox(conversationId)).remove(inputId);
  b.value(bindResult(conversationId, inputId)).set(
    withRequest({ status: "done" as const, entry: entryId }, item.requestId),
  );
}

/** Withdraw a queued input: remove it and record unanswered(aborted) in one commit. */
export async function abortQueuedInput(
  b: TxBuilder,
  conversationId: Id,
  inputId: Id,
): Promise<"aborted" | "not_found"> {
  const result = await b.value(bindResult(conversationId, inputId)).get();
  if (result?.status !== "queued") return "not_found";
  b.list(bindInbox(conversationId)).remove(inputId);
  b.value(bindResult(conversationId, inputId)).set(
    withRequest({ status: "unanswered" as const, reason: "aborted" as const }, result.requestId),
  );
  return "aborted";
}

/** Read the queued items of a conversation in admission order. */
export async function queuedItems(b: TxBuilder, conversationId: Id): Promise<{ id: Id; value: QueuedInput }[]> {
  const items: { id: Id; value: QueuedInput }[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await b
      .list(bindInbox(conversationId))
      .read(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
    items.push(...page.items.map((e) => ({ id: e.id, value: e.value })));
    if (page.next === undefined) return items;
    after = page.next;
  }
}

export function bindInbox(conversationId: Id): List<QueuedInput> {
  return bindTo(inbox, conversationId);
}

export function bindResult(conversationId: Id, inputId: Id): Value<InputResult> {
  return bindTo(inputResult(inputId), conversationId);
}

/** The entry draft a turn-asking input becomes (a user message). */
export function userDraft(input: UserInput, timestamp: number): EntryDraft & { readonly kind: string } {
  const content = typeof input === "string" ? input : [...input];
  return { kind: "user", model: [{ role: "user", content, timestamp }] };
}

/** Data type guard for stored results. */
export function asInputResult(value: unknown): InputResult | undefined {
  if (value === null || typeof value !== "object") return undefined;
  const status = (value as JsonObject)["status"];
  return status === "queued" || status === "placed" || status === "done" || status === "unanswered"
    ? (value as InputResult)
    : undefined;
}

export type { Entry };
