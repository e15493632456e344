/**
 * Watch (§9.4): typed events and a view the harness keeps current, derived from the commit stream, so a
 * client renders and never parses commits. This module is the public face:
 *
 * - `watchConversation(harness, id, { tail, values?, raw? }, call)` and `watchSession(harness, call)`
 *   capture a view and register the subscription in one serialized step on the commit line, so no
 *   commit falls between them (§10.2 "Watch registration races a commit").
 * - `applyEvent` / `applyMessage` / `applySessionEvent` / `applySessionMessage`: the kind-free reducers a
 *   remote UI runs on the same events (watch-reduce.ts).
 * - `watchHub(harness)`: the per-harness hub (watch-hub.ts) that feeds every watch from one commit
 *   listener and owns the `PreviewHub` (preview.ts). Hosts wire session fault, close and reports into it:
 *
 *     driver fail-stop (host.faulted)  -> watchHub(h).fault(report)
 *     harness.close() completed        -> watchHub(h).close()
 *     hook / task error reports        -> watchHub(h).report({ task, kind, method, error })
 *     runtime invocation start         -> watchHub(h).previews.attach(taskId, tracker)
 *
 * Delivery runs outside the line (a microtask after the commit's publication) and a listener never
 * awaits the line; events of one commit are delivered together, in commit order. The hub is created on
 * first use; a harness without watchers pays nothing.
 */
import type { Id } from "../storage/records.js";
import type { Call } from "./call.js";
import type { Harness } from "./harness.js";
import { ConversationWatch, RawConversationWatch, type WatchSources } from "./watch-conversation.js";
import { watchHub, type WatchHub } from "./watch-hub.js";
import { SessionWatch } from "./watch-session.js";
import {
  DEFAULT_MAX_BACKLOG,
  type ConversationEvent,
  type ConversationView,
  type ConversationWatchOptions,
  type RawWatchEvent,
  type SessionEvent,
  type SessionView,
  type SessionWatchOptions,
  type WatchHandle,
} from "./watch-types.js";

export * from "./watch-types.js";
export {
  applyEvent,
  applyInboxOps,
  applyMessage,
  applySessionEvent,
  applySessionMessage,
  extendsContext,
  previewOf,
} from "./watch-reduce.js";
export { PreviewHub } from "./preview.js";
export type { PreviewOutput } from "./watch-channel.js";
export {
  USAGE_LIST_NAMESPACE,
  USAGE_TOTALS_NAMESPACE,
  SESSION_NAME_NAMESPACE,
  type SessionReport,
} from "./watch-session.js";
export { addressKey } from "../storage/shared.js";
export { WatchHub, watchHub } from "./watch-hub.js";

function sources(harness: Harness, hub: WatchHub): WatchSources {
  return { harness, previews: hub.previews };
}

/**
 * Watch one conversation (§9.4). The view is captured on the line together with the registration;
 * `start` delivers everything committed since, then live.
 *
 * @example
 * const w = await watchConversation(h, c.id, { tail: 100 }, call);
 * render(w.view);
 * w.start((event) => render(w.view, event)); // w.view already includes the event's whole commit
 */
export function watchConversation(
  harness: Harness,
  conversationId: Id,
  options: ConversationWatchOptions & { readonly raw: true },
  call: Call,
): Promise<WatchHandle<ConversationView, RawWatchEvent>>;
export function watchConversation(
  harness: Harness,
  conversationId: Id,
  options: ConversationWatchOptions & { readonly raw?: false },
  call: Call,
): Promise<WatchHandle<ConversationView, ConversationEvent>>;
export function watchConversation(
  harness: Harness,
  conversationId: Id,
  options: ConversationWatchOptions,
  _call: Call,
): Promise<WatchHandle<ConversationView, ConversationEvent> | WatchHandle<ConversationView, RawWatchEvent>> {
  const hub = watchHub(harness);
  const settings = {
    tail: options.tail,
    maxBacklog: options.maxBacklog ?? DEFAULT_MAX_BACKLOG,
    ...(options.values === undefined ? {} : { values: options.values }),
  };
  const watch =
    options.raw === true
      ? new RawConversationWatch(hub, sources(harness, hub), conversationId, settings)
      : new ConversationWatch(hub, sources(harness, hub), conversationId, settings);
  return watch.open();
}

/** Watch the session (§9.4): conversations, session values, usage, reports, fault and close. */
export function watchSession(
  harness: Harness,
  _call: Call,
  options: SessionWatchOptions = {},
): Promise<WatchHandle<SessionView, SessionEvent>> {
  const hub = watchHub(harness);
  const watch = new SessionWatch(hub, sources(harness, hub), {
    maxBacklog: options.maxBacklog ?? DEFAULT_MAX_BACKLOG,
    ...(options.values === undefined ? {} : { values: options.values }),
    ...(options.conversations === undefined ? {} : { conversations: options.conversations }),
  });
  return watch.open();
}
