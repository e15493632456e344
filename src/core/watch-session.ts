/**
 * Session watches (§9.4): what isn't one conversation's. The view holds the first page of conversations
 * and the watched session values; events say a conversation was created or deleted, a watched session
 * value changed, a usage row was recorded (the session list pi.usage, with pi.usage.totals after the
 * commit, §8.2), a task or hook reported an error, the session faulted or closed.
 *
 * Used by `watchSession` in watch.ts; the delivery queue is WatchChannel's.
 */
import type { Address, Conversation, Id, JsonObject, JsonValue } from "../storage/records.js";
import { addressKey } from "../storage/shared.js";
import type { CommittedBatch } from "./session-types.js";
import { sessionValue, type ValueRef } from "./state.js";
import { WatchChannel, type ChannelHost, type PreviewOutput, type TerminalEvent } from "./watch-channel.js";
import { watchedAddresses, type WatchSources } from "./watch-conversation.js";
import { applySessionMessage } from "./watch-reduce.js";
import type { SessionEvent, SessionView } from "./watch-types.js";

/** The session list of usage rows and its totals value (§8.2); names shared with src/kinds. */
export const USAGE_LIST_NAMESPACE = "pi.usage";
export const USAGE_TOTALS_NAMESPACE = "pi.usage.totals";
export const SESSION_NAME_NAMESPACE = "pi.session.name";

/** Session values every session watch follows. */
export const defaultSessionValues: readonly ValueRef<unknown>[] = [
  sessionValue(USAGE_TOTALS_NAMESPACE),
  sessionValue(SESSION_NAME_NAMESPACE),
];

const DEFAULT_CONVERSATIONS = 100;
const MAX_CONVERSATIONS = 1000;

/** A report for session watchers (hook and task errors; §9.4 "report"). */
export interface SessionReport {
  readonly task?: Id;
  readonly kind?: string;
  readonly method?: string;
  readonly error: unknown;
}

export class SessionWatch extends WatchChannel<SessionView, SessionEvent, SessionEvent> {
  readonly #sources: WatchSources;
  readonly #pageSize: number;
  readonly #extra: readonly ValueRef<unknown>[];
  #conversations = new Map<Id, Conversation>();
  #watched = new Map<string, Address>();
  #values = new Map<string, JsonValue>();
  readonly #totalsKey = addressKey({ scope: { session: true }, namespace: USAGE_TOTALS_NAMESPACE, rewind: false });

  constructor(
    host: ChannelHost,
    sources: WatchSources,
    options: { values?: readonly ValueRef<unknown>[]; conversations?: number; maxBacklog: number },
  ) {
    super(host, options.maxBacklog);
    const size = options.conversations ?? DEFAULT_CONVERSATIONS;
    if (!Number.isSafeInteger(size) || size < 1 || size > MAX_CONVERSATIONS) {
      throw new RangeError(`conversations must be an integer from 1 to ${MAX_CONVERSATIONS}, got ${String(size)}`);
    }
    this.#sources = sources;
    this.#pageSize = size;
    this.#extra = options.values ?? [];
  }

  protected foldMessage(view: SessionView, seq: Id, events: readonly SessionEvent[]): SessionView {
    return applySessionMessage(view, { seq, events });
  }

  protected terminal(event: TerminalEvent): { fold: SessionEvent; out: SessionEvent } {
    return { fold: event, out: event };
  }

  protected async capture(): Promise<() => SessionView> {
    const harness = this.#sources.harness;
    const storage = harness.storage;
    const readAt = storage.lastSeq;
    const watched = watchedAddresses(harness, {}, [...defaultSessionValues, ...this.#extra], ["session"]);
    const [page, versions] = await Promise.all([
      storage.scanConversations({ limit: this.#pageSize }),
      Promise.all(watched.map((addr) => storage.getValue<JsonValue>(addr))),
    ]);
    return () => {
      this.#conversations = new Map(page.items.map((c) => [c.id, c]));
      this.#watched = new Map(watched.map((addr) => [addressKey(addr), addr]));
      this.#values = new Map();
      const values: Record<string, JsonValue> = {};
      watched.forEach((addr, i) => {
        const version = versions[i];
        if (version === undefined) return;
        const key = addressKey(addr);
        this.#values.set(key, version.value);
        values[key] = version.value;
      });
      return { conversations: [...page.items], values, faulted: harness.fault !== undefined, readAt };
    };
  }

  onCommit(commit: CommittedBatch): void {
    if (!this.accepting) return;
    const events = this.#derive(commit);
    this.advance(commit.last);
    this.enqueue(commit.last, events, events);
  }

  onOutput(_output: PreviewOutput): void {
    // Previews belong to conversation watches.
  }

  onReport(report: SessionReport): void {
    if (!this.accepting) return;
    const event: SessionEvent = {
      type: "report",
      ...(report.task === undefined ? {} : { task: report.task }),
      ...(report.kind === undefined ? {} : { kind: report.kind }),
      ...(report.method === undefined ? {} : { method: report.method }),
      error: report.error,
    };
    this.enqueue(this.lastSeq, [event], [event]);
  }

  #derive(commit: CommittedBatch): SessionEvent[] {
    const events: SessionEvent[] = [];
    const values = new Map<string, JsonValue | undefined>();
    const usage: JsonObject[] = [];
    for (const write of commit.batch.writes) {
      switch (write.type) {
        case "createConversation":
          this.#conversations.set(write.conversation.id, write.conversation);
          events.push({ type: "conversation", conversation: write.conversation, change: "created" });
          break;
        case "deleteConversation": {
          const conversation = this.#conversations.get(write.id) ?? { id: write.id };
          this.#conversations.delete(write.id);
          events.push({ type: "conversation", conversation, change: "deleted" });
          break;
        }
        case "value.set":
        case "value.delete": {
          const key = addressKey(write.addr);
          if (this.#watched.has(key)) values.set(key, write.type === "value.set" ? write.value : undefined);
          break;
        }
        case "list.append":
          if (
            "session" in write.addr.scope &&
            write.addr.namespace === USAGE_LIST_NAMESPACE &&
            write.addr.key === undefined &&
            isObject(write.value)
          ) {
            usage.push(write.value);
          }
          break;
        case "list.remove":
        case "list.clear":
        case "entry":
        case "task":
        case "patch":
        case "settle":
          break;
        default: {
          const never: never = write;
          throw new TypeError(`unknown write ${String((never as { type?: unknown }).type)}`);
        }
      }
    }
    for (const [key, value] of values) {
      if (value === undefined) this.#values.delete(key);
      else this.#values.set(key, value);
      events.push({ type: "value", addr: this.#watched.get(key) as Address, value });
    }
    for (const row of usage) events.push({ type: "usage", row, totals: this.#values.get(this.#totalsKey) });
    return events;
  }
}

function isObject(value: JsonValue): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
