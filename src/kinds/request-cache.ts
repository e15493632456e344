/**
 * Request building that grows only with new entries (docs/performance.md "Time on Node"; §2.2 "messages", §8.2
 * preparation).
 * A generation derives three things from the conversation's context on every request: the request
 * messages (`requestMessages`), the effective tools declared by its system messages (`foldTools`) and
 * its current-epoch baseline (`currentEpochBaseline`). Each is a left fold over the context items, and
 * successive contexts of a conversation mostly extend the previous one (the context cache appends the
 * entries each commit lands), so `ContextProjection` keeps the folds of the items it saw last and, for a
 * context whose items start with exactly those item objects (identity; items and their messages are
 * frozen), folds only the new items. Anything else (an edit replaced an item, a new head, a fork, a
 * historical target) rebuilds from the whole context. Results equal the from-scratch functions.
 *
 * Request messages: tool-exchange normalization works per segment (the messages before the first
 * assistant, then each replayable assistant up to the next one), so finished segments are kept
 * normalized and only the open segment, which later results may still complete, is normalized again.
 */
import type { Tool } from "@earendil-works/pi-ai";
import type { ContextItem, DerivedContext } from "../core/context.js";
import { extendsItems, isReplayable, normalizeToolExchanges } from "../core/context.js";
import type { Id, Message } from "../storage/records.js";
import { applyToolFields, isBaselineEntry } from "./sections-fold.js";

/** What a projection did, for tests and benchmarks; only ever increases. */
export interface ProjectionStats {
  /** Contexts with the same items as the previous one. */
  readonly reused: number;
  /** Contexts that extended the previous one (only the new items folded). */
  readonly extended: number;
  /** Contexts folded from scratch. */
  readonly rebuilt: number;
}

export class ContextProjection {
  #items: readonly ContextItem[] = [];
  #headId: Id | undefined;
  /** Normalized request messages of the finished segments. */
  #done: Message[] = [];
  /** Sum of `contentChars` over #done: finished segments are never normalized again, so it only grows. */
  #doneChars = 0;
  /** Flat messages of the open segment (from the newest replayable assistant, or the preamble). */
  #open: Message[] = [];
  #messages: readonly Message[] | undefined;
  readonly #tools = new Map<string, Tool>();
  #baseline: Id | undefined;
  #stats = { reused: 0, extended: 0, rebuilt: 0 };

  get stats(): ProjectionStats {
    return { ...this.#stats };
  }

  /** `requestMessages(context)`; a fresh array the caller may change (the messages are shared, frozen). */
  requestMessages(context: DerivedContext): Message[] {
    this.#sync(context);
    if (this.#messages === undefined) this.#messages = this.#done.concat(normalizeToolExchanges(this.#open));
    return this.#messages.slice();
  }

  /**
   * `estimateTokensCached(this.requestMessages(context))` without walking the whole request: the
   * estimate is a sum over messages, the finished segments' part is kept as they close, and only the
   * open segment's messages are counted per call.
   */
  estimateTokens(context: DerivedContext): number {
    this.#sync(context);
    let chars = this.#doneChars;
    for (const m of normalizeToolExchanges(this.#open)) chars += messageChars(m);
    return Math.ceil(chars / 4);
  }

  /** `foldTools(context.items.map((i) => i.messages))`; a fresh map. */
  tools(context: DerivedContext): Map<string, Tool> {
    this.#sync(context);
    return new Map(this.#tools);
  }

  /** `currentEpochBaseline(context)`. */
  baseline(context: DerivedContext): Id | undefined {
    this.#sync(context);
    return this.#baseline;
  }

  #sync(context: DerivedContext): void {
    const items = context.items;
    const headId = context.head?.id;
    if (items === this.#items && headId === this.#headId) {
      this.#stats.reused++;
      return;
    }
    const previous = this.#items;
    let from = 0;
    if (
      headId === this.#headId &&
      previous.length > 0 &&
      previous.length <= items.length &&
      (extendsItems(previous, items) || previous.every((item, i) => items[i] === item))
    ) {
      from = previous.length;
      this.#stats.extended++;
    } else {
      this.#done = [];
      this.#doneChars = 0;
      this.#open = [];
      this.#tools.clear();
      this.#baseline = undefined;
      this.#stats.rebuilt++;
    }
    this.#items = items;
    this.#headId = headId;
    this.#messages = undefined;
    for (let i = from; i < items.length; i++) this.#add(items[i] as ContextItem, headId ?? 0);
  }

  #add(item: ContextItem, headId: Id): void {
    if (item.entry.id > headId && isBaselineEntry(item.entry)) this.#baseline = item.entry.id;
    applyToolFields(this.#tools, item.messages);
    for (const message of item.messages) {
      if (message.role === "assistant") {
        if (!isReplayable(message)) continue;
        // A replayable assistant closes the open segment: nothing later can change its normalization.
        for (const closed of normalizeToolExchanges(this.#open)) {
          this.#done.push(closed);
          this.#doneChars += messageChars(closed);
        }
        this.#open = [message];
      } else {
        this.#open.push(message);
      }
    }
  }
}

/** Per-conversation projections, the most recently used `capacity` kept. */
export class ProjectionCache {
  readonly #byConversation = new Map<Id, ContextProjection>();

  constructor(readonly capacity: number = 64) {}

  of(conversationId: Id): ContextProjection {
    let projection = this.#byConversation.get(conversationId);
    if (projection !== undefined) {
      this.#byConversation.delete(conversationId);
    } else {
      projection = new ContextProjection();
      if (this.#byConversation.size >= this.capacity) {
        const oldest = this.#byConversation.keys().next().value;
        if (oldest !== undefined) this.#byConversation.delete(oldest);
      }
    }
    this.#byConversation.set(conversationId, projection);
    return projection;
  }
}

/** A cheap token estimate (chars/4) for the threshold check; providers count exactly. */
export function estimateTokens(messages: readonly Message[]): number {
  let chars = 0;
  for (const m of messages) chars += JSON.stringify(m.content ?? "").length;
  return Math.ceil(chars / 4);
}

/** Characters of each message's JSON content (the threshold estimate's unit), memoized per frozen message. */
const contentChars = new WeakMap<Message, number>();

/** One message's share of `estimateTokens` (characters of its JSON content), memoized when frozen. */
function messageChars(m: Message): number {
  let n = contentChars.get(m);
  if (n === undefined) {
    n = JSON.stringify(m.content ?? "").length;
    if (Object.isFrozen(m)) contentChars.set(m, n);
  }
  return n;
}

/** `estimateTokens` with each message's JSON length computed once. */
export function estimateTokensCached(messages: readonly Message[]): number {
  let chars = 0;
  for (const m of messages) chars += messageChars(m);
  return Math.ceil(chars / 4);
}
