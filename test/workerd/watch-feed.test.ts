/**
 * The conversation watch feed (src/worker/watch/feed.ts, §9.4) shows entries as the HTTP API
 * serves them: a tool result entry's data whole (§9.3), in the view and in the commit messages alike, so
 * a client that folds the messages onto its first view (src/core/watch-reduce.ts) ends with the entries
 * of a fresh view; the core watch and storage keep the compact data (fewer stored bytes). The same holds for
 * a settled tool task's output in the conversation feed's task events and for the session feed's usage
 * rows (whole, as GET /usage serves them).
 */
import type { ToolResultMessage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { toolResultEntry, toolResultKind, userEntry, userKind } from "../../src/core/entries.js";
import type { Harness } from "../../src/core/harness.js";
import { bind } from "../../src/core/state.js";
import {
  applyMessage,
  applySessionMessage,
  watchConversation,
  watchSession,
  type ConversationEvent,
  type ConversationView,
  type SessionEvent,
  type SessionView,
} from "../../src/core/watch.js";
import { compactToolData, readUsageRow } from "../../src/kinds/stored.js";
import { usageList } from "../../src/kinds/usage.js";
import type { FeedOut } from "../../src/worker/watch/feed.js";
import { WatchFeed } from "../../src/worker/watch/feed.js";
import { conversationPresenter, sessionPresenter } from "../../src/worker/watch/transport.js";
import { coreBackends } from "../core/backends.js";
import { call, openHarness } from "../core/fixtures.js";
import { untruncatedToolData } from "../kinds/tool-data-fixtures.js";
import { fauxAssistantMessage, fauxToolCall, openTurns } from "../kinds/turn-fixtures.js";

const whole = untruncatedToolData;

function resultMessage(id: string, text: string): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: id,
    toolName: "echo",
    content: [{ type: "text", text }],
    isError: false,
    timestamp: 0,
  };
}

/** Line round trips interleaved with macrotask yields: deliveries settle. */
async function flush(h: Harness): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await h.line.run(() => undefined);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
}

type Out = FeedOut<ConversationView, ConversationEvent>;

function subscribe(feed: WatchFeed<ConversationView, ConversationEvent>, lastEventId?: string): Out[] {
  const received: Out[] = [];
  feed.subscribe(
    { send: (out) => received.push(JSON.parse(JSON.stringify(out)) as Out), end: () => undefined },
    lastEventId,
  );
  return received;
}

for (const backend of coreBackends) {
  describe(`conversation watch feed presentation (${backend.name})`, () => {
    it(`a tool result entry's data is whole in the feed's view, its commit messages and a replay, and the folded messages equal a fresh view (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        // One tool result written before the watch (in the view), one after (in a commit message); one
        // stored whole as an earlier version wrote it.
        await root.commit(
          (tx) => tx.entry(toolResultKind, toolResultEntry(resultMessage("a", "ping"), compactToolData(whole(4)))),
          call,
        );
        const handle = await watchConversation(h, root.id, { tail: 10 }, call);
        const feed = new WatchFeed<ConversationView, ConversationEvent>(
          handle,
          16,
          () => undefined,
          conversationPresenter(),
        );
        const first = subscribe(feed);
        await root.commit((tx) => tx.entry(userKind, userEntry("more", 0)), call);
        const late = await root.commit(
          (tx) => tx.entry(toolResultKind, toolResultEntry(resultMessage("b", "pong!"), compactToolData(whole(5)))),
          call,
        );
        const old = await root.commit(
          (tx) => tx.entry(toolResultKind, toolResultEntry(resultMessage("c", "old"), whole(3))),
          call,
        );
        await flush(h);

        expect(first[0]?.type).toBe("view");
        let folded = (first[0] as Extract<Out, { type: "view" }>).view;
        expect(folded.entries.filter((e) => e.kind === "tool_result").map((e) => e.data)).toEqual([whole(4)]);
        const commits = first.slice(1).flatMap((out) => (out.type === "commit" ? [out] : []));
        for (const out of commits) folded = applyMessage(folded, { seq: out.seq, events: out.events });
        const appended = commits
          .flatMap((out) => out.events)
          .flatMap((e) => (e.type === "entry" && e.entry.kind === "tool_result" ? [e.entry] : []));
        expect(appended.map((e) => [e.id, e.data])).toEqual([
          [late, whole(5)],
          [old, whole(3)],
        ]);

        const fresh = subscribe(feed);
        expect(fresh[0]?.type).toBe("view");
        expect((fresh[0] as Extract<Out, { type: "view" }>).view.entries).toEqual(folded.entries);
        const replay = subscribe(feed, first[0]?.id);
        expect(replay.map((out) => out.type)).toEqual(commits.map(() => "commit"));
        expect(replay).toEqual(commits);

        // The core watch and storage keep what was written.
        expect(handle.view.entries.find((e) => e.id === late)?.data).toEqual({ chars: 5 });
        expect((await storage.getEntries([late])).get(late)?.data).toEqual({ chars: 5 });
        feed.close();
      }));
  });
}

type SessionOut = FeedOut<SessionView, SessionEvent>;

function subscribeSession(feed: WatchFeed<SessionView, SessionEvent>, lastEventId?: string): SessionOut[] {
  const received: SessionOut[] = [];
  feed.subscribe(
    { send: (out) => received.push(JSON.parse(JSON.stringify(out)) as SessionOut), end: () => undefined },
    lastEventId,
  );
  return received;
}

function viewOf<V>(out: FeedOut<V, unknown> | undefined): V {
  if (out?.type !== "view") throw new Error(`expected a view, got ${String(out?.type)}`);
  return out.view;
}

for (const backend of coreBackends) {
  describe(`task and usage presentation in the watch feeds (${backend.name})`, () => {
    it(`a settled tool task's output is whole in the conversation feed's task events and the session feed's usage rows are whole; folding the presented messages onto the first presented view equals a fresh presented view (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness: h } = await openTurns(storage, {
          responses: [
            fauxAssistantMessage([fauxToolCall("echo", { text: "ping" }, { id: "c1" })], { stopReason: "toolUse" }),
            fauxAssistantMessage("done"),
          ],
        });
        const root = await h.root(call);
        const conversation = new WatchFeed<ConversationView, ConversationEvent>(
          await watchConversation(h, root.id, { tail: 10 }, call),
          64,
          () => undefined,
          conversationPresenter(),
        );
        const sessionHandle = await watchSession(h, call);
        const session = new WatchFeed<SessionView, SessionEvent>(
          sessionHandle,
          64,
          () => undefined,
          sessionPresenter(),
        );
        const conversationOut = subscribe(conversation);
        const sessionOut = subscribeSession(session);
        await root.prompt({ input: "go" }, call);
        await flush(h);

        // The conversation feed: the tool task settles with its output whole.
        let folded = viewOf(conversationOut[0]);
        const commits = conversationOut.slice(1).flatMap((out) => (out.type === "commit" ? [out] : []));
        const ended = commits
          .flatMap((out) => out.events)
          .flatMap((e) => (e.type === "task_end" && e.task.kind === "tool" ? [e.task] : []));
        expect(ended.length).toBe(1);
        expect((ended[0]?.state as { output?: unknown }).output).toEqual(whole(4));
        for (const out of commits) folded = applyMessage(folded, { seq: out.seq, events: out.events });
        expect(viewOf(subscribe(conversation)[0])).toEqual(folded);
        expect(subscribe(conversation, conversationOut[0]?.id)).toEqual(commits);

        // The session feed: every usage row whole, as GET /usage reads it.
        let foldedSession = viewOf(sessionOut[0]);
        const sessionCommits = sessionOut.slice(1).flatMap((out) => (out.type === "commit" ? [out] : []));
        const stored = (await storage.readList(bind(usageList, {}), { limit: 10 })).items.map((e) => e.value);
        expect(stored.length).toBe(2);
        const rows = sessionCommits.flatMap((out) => out.events).flatMap((e) => (e.type === "usage" ? [e.row] : []));
        expect(rows).toEqual(stored.map((s) => readUsageRow(s)));
        expect(rows.every((r) => r["kind"] === "generation")).toBe(true);
        for (const out of sessionCommits)
          foldedSession = applySessionMessage(foldedSession, { seq: out.seq, events: out.events });
        expect(viewOf(subscribeSession(session)[0])).toEqual(foldedSession);
        expect(subscribeSession(session, sessionOut[0]?.id)).toEqual(sessionCommits);

        // The core watch and storage keep what was written: compact.
        const tool = (await storage.scanTasks({ kind: "tool", limit: 10 })).items[0];
        expect((tool?.state as { output?: unknown }).output).toEqual({ chars: 4 });
        expect(stored.every((s) => s.kind === undefined)).toBe(true);
        conversation.close();
        session.close();
      }));
  });
}
