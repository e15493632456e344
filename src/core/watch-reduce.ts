/**
 * The watch reducers (§9.4): `applyEvent(view, event)` folds one conversation event into a view, and
 * `applyMessage` folds one per-commit message (its events, then `readAt`). They need no kinds and no
 * harness, so a UI in another process runs exactly this code on the events it receives; the harness
 * maintains every handle's view with the same functions, which is what keeps the two from drifting.
 *
 * Pure: a new view is returned and the old one is left as it was (arrays and maps are copied on change;
 * unchanged parts are shared). Task-output ops use Chord's `applyImmutable`, so one batch of ops can be
 * folded into several views (fan-out) without one fold adopting or mutating what another holds.
 */
import { applyImmutable } from "@earendil-works/chord/delta";
import type { Conversation, Element, Entry, Id, JsonValue, Task } from "../storage/records.js";
import { addressKey } from "../storage/shared.js";
import type { QueuedInput } from "./inbox.js";
import type {
  ConversationEvent,
  ConversationView,
  InboxOp,
  SessionEvent,
  SessionView,
  WatchMessage,
} from "./watch-types.js";

/**
 * True when appending `entry` simply extends the derived context by its id: it is not a head and carries
 * no edits (§2.2). Heads and edits change the context otherwise; the harness sends a `context` event.
 */
export function extendsContext(entry: Entry): boolean {
  return entry.head === undefined && (entry.edits === undefined || entry.edits.length === 0);
}

/** Fold one conversation event into a view. */
export function applyEvent(view: ConversationView, event: ConversationEvent): ConversationView {
  switch (event.type) {
    case "entry": {
      const { entry } = event;
      if (view.entries.some((e) => e.id === entry.id)) return view;
      const entries = view.tail <= 0 ? [] : [...view.entries, entry];
      if (entries.length > view.tail) entries.splice(0, entries.length - view.tail);
      return extendsContext(entry) ? { ...view, entries, context: [...view.context, entry.id] } : { ...view, entries };
    }
    case "task_start":
    case "task_update":
      return { ...view, tasks: upsertTask(view.tasks, event.task) };
    case "task_end": {
      const id = event.task.id;
      const key = String(id);
      if (!Object.hasOwn(view.previews, key)) return { ...view, tasks: view.tasks.filter((t) => t.id !== id) };
      const { [key]: _dropped, ...previews } = view.previews;
      return { ...view, tasks: view.tasks.filter((t) => t.id !== id), previews };
    }
    case "task_output": {
      const key = String(event.task);
      const current = Object.hasOwn(view.previews, key) ? view.previews[key] : undefined;
      return { ...view, previews: { ...view.previews, [key]: applyImmutable<JsonValue>(current, event.ops) } };
    }
    case "value":
      return { ...view, values: setValue(view.values, addressKey(event.addr), event.value) };
    case "inbox":
      return { ...view, inbox: applyInboxOps(view.inbox, event.ops) };
    case "context":
      return { ...view, context: [...event.ids] };
    case "fault":
      return { ...view, faulted: true };
    case "closed":
      return view;
    default: {
      const never: never = event;
      throw new TypeError(`unknown conversation event ${String((never as { type?: unknown }).type)}`);
    }
  }
}

/** Fold one per-commit message: every event in order, then `readAt = seq`. */
export function applyMessage(view: ConversationView, message: WatchMessage<ConversationEvent>): ConversationView {
  let next = view;
  for (const event of message.events) next = applyEvent(next, event);
  return next.readAt === message.seq ? next : { ...next, readAt: message.seq };
}

/** Fold one session event into a session view. */
export function applySessionEvent(view: SessionView, event: SessionEvent): SessionView {
  switch (event.type) {
    case "conversation":
      return {
        ...view,
        conversations:
          event.change === "created"
            ? insertConversation(view.conversations, event.conversation)
            : view.conversations.filter((c) => c.id !== event.conversation.id),
      };
    case "value":
      return { ...view, values: setValue(view.values, addressKey(event.addr), event.value) };
    case "usage":
    case "report":
      // Usage totals arrive as the value event of pi.usage.totals; reports change no state.
      return view;
    case "fault":
      return { ...view, faulted: true };
    case "closed":
      return view;
    default: {
      const never: never = event;
      throw new TypeError(`unknown session event ${String((never as { type?: unknown }).type)}`);
    }
  }
}

export function applySessionMessage(view: SessionView, message: WatchMessage<SessionEvent>): SessionView {
  let next = view;
  for (const event of message.events) next = applySessionEvent(next, event);
  return next.readAt === message.seq ? next : { ...next, readAt: message.seq };
}

/** Apply inbox ops in order (exported for transports that keep only the inbox). */
export function applyInboxOps(
  inbox: readonly Element<QueuedInput>[],
  ops: readonly InboxOp[],
): readonly Element<QueuedInput>[] {
  let next = inbox;
  for (const op of ops) {
    switch (op.type) {
      case "append":
        if (!next.some((e) => e.id === op.item.id)) next = [...next, op.item];
        break;
      case "remove":
        next = next.filter((e) => e.id !== op.id);
        break;
      case "clear":
        next = [];
        break;
      default: {
        const never: never = op;
        throw new TypeError(`unknown inbox op ${String((never as { type?: unknown }).type)}`);
      }
    }
  }
  return next;
}

function upsertTask(tasks: readonly Task[], task: Task): readonly Task[] {
  const i = tasks.findIndex((t) => t.id >= task.id);
  if (i === -1) return [...tasks, task];
  const next = [...tasks];
  if (tasks[i]?.id === task.id) next[i] = task;
  else next.splice(i, 0, task);
  return next;
}

function insertConversation(list: readonly Conversation[], conversation: Conversation): readonly Conversation[] {
  const i = list.findIndex((c) => c.id >= conversation.id);
  if (i === -1) return [...list, conversation];
  if (list[i]?.id === conversation.id) return list;
  const next = [...list];
  next.splice(i, 0, conversation);
  return next;
}

function setValue(
  values: Readonly<Record<string, JsonValue>>,
  key: string,
  value: JsonValue | undefined,
): Readonly<Record<string, JsonValue>> {
  if (value !== undefined) return { ...values, [key]: value };
  if (!Object.hasOwn(values, key)) return values;
  const { [key]: _dropped, ...rest } = values;
  return rest;
}

/** The preview of a task in a view, if it has one. */
export function previewOf(view: ConversationView, task: Id): JsonValue | undefined {
  const key = String(task);
  return Object.hasOwn(view.previews, key) ? view.previews[key] : undefined;
}
