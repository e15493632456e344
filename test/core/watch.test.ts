/**
 * Watch (§9.4) on every core backend: capture and registration on the line (§10.2), per-commit events
 * in commit order, the kind-free reducer replicating the server's view over JSON, inbox folding, config
 * values, context events, lag and resnapshot, unsubscribe, previews, raw and session watches.
 */
import { track } from "@earendil-works/chord/delta";
import { describe, expect, it } from "vitest";
import { deriveContext } from "../../src/core/context.js";
import { handoffEntry, handoffKind, userEntry, userKind } from "../../src/core/entries.js";
import type { Harness } from "../../src/core/harness.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { conversationValue, scratchValue, sessionList, sessionValue } from "../../src/core/state.js";
import { defineTaskKind, erase } from "../../src/core/task-kind.js";
import {
  addressKey,
  applyEvent,
  applyMessage,
  applySessionMessage,
  previewOf,
  watchConversation,
  watchHub,
  watchSession,
  type ConversationEvent,
  type ConversationView,
  type RawWatchEvent,
  type SessionEvent,
  type WatchMessage,
} from "../../src/core/watch.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import { call, openHarness, PausableStorage, testTaskKinds, workKind } from "./fixtures.js";

const mode = conversationValue<string>("plugin.mode", { rewind: false });
const level = conversationValue<number>("plugin.level", { rewind: true });
const budget = sessionValue<number>("plugin.budget");
const extra = conversationValue<string>("ui.note", { rewind: false });

type ConfiguredState = { status: "pending" } | { status: "done" };
const configuredKind = defineTaskKind<ConfiguredState>()({
  kind: "configured",
  roles: { pending: "start", done: "terminal" },
  initialStatus: "pending",
  config: { mode, level, budget },
  execute: async () => undefined,
  recover: async () => undefined,
  abort: async () => undefined,
});

/** A kind that streams a preview: each token is one scratch commit; it waits on `gate` before settling. */
type StreamState = { status: "planned"; tokens: string[] } | { status: "done"; tokens: string[] };
const streamControl = { gate: gate(), hub: undefined as ReturnType<typeof watchHub> | undefined };
const buffer = scratchValue<string>("stream.buffer");
const streamKind = defineTaskKind<StreamState, TaskRuntime>()({
  kind: "stream",
  roles: { planned: "start", done: "terminal" },
  initialStatus: "planned",
  execute: async (task, runtime, c) => {
    const tracker = track<{ text: string }>({ text: "" });
    streamControl.hub?.previews.attach(task.id, tracker);
    for (const token of task.state.tokens) {
      tracker.state.text += token;
      await runtime.scratch((sc) => sc.value(buffer).set(tracker.state.text), c);
    }
    await streamControl.gate.promise;
    await runtime.commit((tx) => tx.settle(task, "done", { tokens: task.state.tokens }), c);
  },
  recover: async () => undefined,
  abort: async () => undefined,
});

/** Two kinds that write `stream.buffer` to scratch and wait on `initControl.gate`: one declares `preview`. */
type BufferedState = { status: "planned"; text: string } | { status: "done"; text: string };
const initControl = { gate: gate() };
function bufferedKind(name: string, preview: boolean) {
  return defineTaskKind<BufferedState, TaskRuntime>()({
    kind: name,
    roles: { planned: "start", done: "terminal" },
    initialStatus: "planned",
    ...(preview
      ? { preview: { init: async (scratch, c) => ({ text: (await scratch.value(buffer).get(c)) ?? "" }) } }
      : {}),
    execute: async (task, runtime, c) => {
      await runtime.scratch((sc) => sc.value(buffer).set(task.state.text), c);
      await initControl.gate.promise;
      await runtime.commit((tx) => tx.settle(task, "done", { text: task.state.text }), c);
    },
    recover: async () => undefined,
    abort: async () => undefined,
  });
}
const previewedKind = bufferedKind("previewed", true);
const plainKind = bufferedKind("plain", false);

const kinds = [...testTaskKinds, erase(configuredKind), erase(streamKind), erase(previewedKind), erase(plainKind)];

function open(storage: Storage): Promise<Harness> {
  return openHarness(storage, { taskKinds: kinds });
}

interface Gate {
  readonly promise: Promise<void>;
  resolve(): void;
}

function gate(): Gate {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve: () => resolve() };
}

/** Line round trips interleaved with macrotask yields: commits in flight and deliveries settle. */
async function flush(h: Harness, rounds: number): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await h.line.run(() => undefined);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
}

/** Resolve once `predicate` holds (bounded number of flushes, never a wall-clock wait). */
async function until(h: Harness, predicate: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (predicate()) return;
    await flush(h, 1);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** JSON round trip: what a remote UI receives. */
function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Let queued deliveries run. */
async function delivered(h: Harness): Promise<void> {
  await flush(h, 2);
}

function countEntry(view: ConversationView, events: readonly ConversationEvent[], id: Id): number {
  return (
    view.entries.filter((e) => e.id === id).length +
    events.filter((e) => e.type === "entry" && e.entry.id === id).length
  );
}

function types(events: readonly ConversationEvent[] | readonly SessionEvent[]): string[] {
  return events.map((e) => e.type);
}

for (const backend of coreBackends) {
  describe(`watch (${backend.name})`, () => {
    it(`§10.2 Watch registration races a commit (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new PausableStorage(inner);
        const h = await open(storage);
        const root = await h.root(call);

        // Order 1: the commit is in flight (held at the storage barrier) when the watch asks to register;
        // registration waits on the line, so the base includes the entry and the stream does not repeat it.
        storage.pause();
        const landing = root.commit((tx) => tx.entry(userKind, userEntry("first", 0)), call);
        const watching = watchConversation(h, root.id, { tail: 10 }, call);
        storage.resume();
        const [first, w1] = await Promise.all([landing, watching]);
        const events1: ConversationEvent[] = [];
        const base1 = w1.view;
        w1.start((e) => events1.push(e));
        await delivered(h);
        expect(base1.readAt).toBeGreaterThanOrEqual(first);
        expect(countEntry(base1, events1, first)).toBe(1);
        expect(base1.entries.map((e) => e.id)).toContain(first);
        w1.unsubscribe();

        // Order 2: the watch registers first; the commit queued behind it is delivered by the stream.
        const watching2 = watchConversation(h, root.id, { tail: 10 }, call);
        const landing2 = root.commit((tx) => tx.entry(userKind, userEntry("second", 0)), call);
        const [w2, second] = await Promise.all([watching2, landing2]);
        const base2 = w2.view;
        const events2: ConversationEvent[] = [];
        w2.start((e) => events2.push(e));
        await delivered(h);
        expect(base2.entries.map((e) => e.id)).not.toContain(second);
        expect(countEntry(base2, events2, second)).toBe(1);
        expect(w2.view.entries.map((e) => e.id)).toEqual([first, second]);
        expect(w2.view.readAt).toBe(second);
      }));

    it(`events arrive per commit in commit order, and a settling task and its successor created in the same batch never show an idle gap (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 5 }, call);
        const messages: WatchMessage<ConversationEvent>[] = [];
        w.startCommits((m) => messages.push(m));
        const a = await root.commit((tx) => tx.task(workKind, { state: { status: "pending", input: 1 } }), call);
        const taskA = (await h.getTask(workKind, a, call))!;
        const running = await root.commit((tx) => {
          if (taskA.state.status !== "pending") throw new Error("narrowing");
          tx.patch(taskA, "running", { input: 1, attempt: 1 });
          return storage.lastSeq + 1;
        }, call);
        const runningA = (await h.getTask(workKind, a, call))!;
        const b = await root.commit((tx) => {
          tx.settle(runningA, "done", { input: 1, output: "ok" });
          return tx.task(workKind, { state: { status: "pending", input: 2 } });
        }, call);
        await delivered(h);
        expect(messages.map((m) => m.seq)).toEqual([a, running, b]);
        expect(messages.map((m) => types(m.events))).toEqual([
          ["task_start"],
          ["task_update"],
          ["task_end", "task_start"],
        ]);
        const update = messages[1]?.events[0];
        expect(update?.type === "task_update" && update.previous.state.status).toBe("pending");
        expect(update?.type === "task_update" && update.task.state).toEqual({
          status: "running",
          input: 1,
          attempt: 1,
        });
        const end = messages[2]?.events[0];
        expect(end?.type === "task_end" && end.task.state).toEqual({ status: "done", input: 1, output: "ok" });
        expect(w.view.tasks.map((t) => t.id)).toEqual([b]);

        // Per-event delivery: the view already includes the whole commit, so no listener call sees no live task.
        const w2 = await watchConversation(h, root.id, { tail: 5 }, call);
        const liveAtEachEvent: number[] = [];
        w2.start(() => liveAtEachEvent.push(w2.view.tasks.length));
        const taskB = (await h.getTask(workKind, b, call))!;
        const c = await root.commit((tx) => {
          tx.settle(taskB, "failed", { input: 2, error: "x" });
          return tx.task(workKind, { state: { status: "pending", input: 3 } });
        }, call);
        await delivered(h);
        expect(liveAtEachEvent).toEqual([1, 1]);
        expect(w2.view.tasks.map((t) => t.id)).toEqual([c]);
      }));

    it(`a remote reducer replicates the server view: the JSON view plus delivered JSON messages folded with applyMessage equal the maintained view and a fresh capture (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        await root.commit((tx) => tx.entry(userKind, userEntry("before", 0)), call);
        const w = await watchConversation(h, root.id, { tail: 4, values: [extra] }, call);
        let remote = wire(w.view);
        w.startCommits((m) => {
          remote = applyMessage(remote, wire(m));
        });
        const taskId = await root.commit((tx) => {
          tx.value(mode).set("plan");
          tx.value(level).set(1);
          tx.entry(userKind, userEntry("one", 0));
          return tx.task(workKind, { state: { status: "pending", input: 7 } });
        }, call);
        const q1 = await root.queueInput({ mode: "followUp", input: "later" }, call);
        await root.queueInput({ mode: "nextRun", input: "much later" }, call);
        await root.commit((tx) => tx.value(extra).set("note"), call);
        for (let i = 0; i < 5; i++) await root.commit((tx) => tx.entry(userKind, userEntry(`n${i}`, 0)), call);
        await root.abortInput(q1.inputId, call);
        await root.commit((tx) => tx.entry(handoffKind, handoffEntry("fresh start", 0)), call);
        await root.commit((tx) => tx.entry(userKind, userEntry("after head", 0)), call);
        const task = (await h.getTask(workKind, taskId, call))!;
        await root.commit((tx) => {
          if (task.state.status !== "pending") throw new Error("narrowing");
          tx.patch(task, "running", { input: 7, attempt: 1 });
          tx.value(mode).delete();
        }, call);
        await h.commit((tx) => tx.value(budget).set(3), call);
        await delivered(h);

        expect(remote).toEqual(wire(w.view));
        expect(w.view.readAt).toBe(storage.lastSeq);
        expect(w.view.entries).toHaveLength(4);
        expect(w.view.tasks.map((t) => t.state.status)).toEqual(["running"]);
        expect(w.view.inbox.map((e) => e.value.mode)).toEqual(["nextRun"]);
        expect(w.view.values).toEqual({
          [addressKey({ scope: { conversation: root.id }, namespace: "plugin.level", rewind: true })]: 1,
          [addressKey({ scope: { conversation: root.id }, namespace: "ui.note", rewind: false })]: "note",
          [addressKey({ scope: { session: true }, namespace: "plugin.budget", rewind: false })]: 3,
        });
        expect(w.view.context).toEqual([...(await deriveContext(storage, root.id, storage.lastSeq)).ids]);

        const fresh = await watchConversation(h, root.id, { tail: 4, values: [extra] }, call);
        expect(wire(fresh.view)).toEqual(wire(w.view));
      }));

    it(`an idle same-commit inbox append and remove emits no inbox event; a queued input and its withdrawal do (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 10 }, call);
        const messages: WatchMessage<ConversationEvent>[] = [];
        w.startCommits((m) => messages.push(m));
        await root.write(userKind, userEntry("idle note", 0), call);
        await delivered(h);
        expect(messages).toHaveLength(1);
        expect(types(messages[0]?.events ?? [])).toEqual(["entry"]);

        const { inputId } = await root.queueInput({ mode: "followUp", input: "queued" }, call);
        await root.abortInput(inputId, call);
        await delivered(h);
        expect(messages.slice(1).map((m) => m.events)).toEqual([
          [
            {
              type: "inbox",
              ops: [{ type: "append", item: { id: inputId, value: { mode: "followUp", input: "queued" } } }],
            },
          ],
          [{ type: "inbox", ops: [{ type: "remove", id: inputId }] }],
        ]);
        expect(w.view.inbox).toEqual([]);
      }));

    it(`value events follow the values registered kinds declare in config, bound to the conversation, and requested addresses; other values stay silent (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const other = await root.fork({ at: "start" }, call);
        await root.commit((tx) => tx.value(mode).set("before"), call);
        const w = await watchConversation(h, root.id, { tail: 1, values: [extra] }, call);
        expect(w.view.values).toEqual({ [addressKey(bindMode(root.id))]: "before" });
        const events: ConversationEvent[] = [];
        w.start((e) => events.push(e));
        await root.commit((tx) => tx.value(mode).set("plan"), call);
        await other.commit((tx) => tx.value(mode).set("elsewhere"), call);
        await root.commit((tx) => tx.value(conversationValue<string>("undeclared", { rewind: false })).set("x"), call);
        await h.commit((tx) => tx.value(budget).set(10), call);
        await root.commit((tx) => {
          tx.value(extra).set("a");
          tx.value(extra).set("b");
        }, call);
        await delivered(h);
        expect(events).toEqual([
          { type: "value", addr: bindMode(root.id), value: "plan" },
          { type: "value", addr: { scope: { session: true }, namespace: "plugin.budget", rewind: false }, value: 10 },
          // Folded per commit: the last write of an address wins.
          {
            type: "value",
            addr: { scope: { conversation: root.id }, namespace: "ui.note", rewind: false },
            value: "b",
          },
        ]);
        await root.commit((tx) => tx.value(mode).delete(), call);
        await delivered(h);
        expect(events.at(-1)).toEqual({ type: "value", addr: bindMode(root.id), value: undefined });
        expect(w.view.values[addressKey(bindMode(root.id))]).toBeUndefined();
      }));

    it(`a head entry changes the derived context: one context event with the derived ids; plain entries extend it without one (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const u1 = await root.commit((tx) => tx.entry(userKind, userEntry("u1", 0)), call);
        const w = await watchConversation(h, root.id, { tail: 10 }, call);
        expect(w.view.context).toEqual([u1]);
        const messages: WatchMessage<ConversationEvent>[] = [];
        w.startCommits((m) => messages.push(m));
        const u2 = await root.commit((tx) => tx.entry(userKind, userEntry("u2", 0)), call);
        const head = await root.commit((tx) => tx.entry(handoffKind, handoffEntry("handoff", 0)), call);
        const u3 = await root.commit((tx) => tx.entry(userKind, userEntry("u3", 0)), call);
        await delivered(h);
        expect(messages.map((m) => types(m.events))).toEqual([["entry"], ["entry", "context"], ["entry"]]);
        expect(messages[1]?.events[1]).toEqual({ type: "context", ids: [head] });
        expect(w.view.context).toEqual([head, u3]);
        expect(w.view.context).toEqual([...(await deriveContext(storage, root.id, storage.lastSeq)).ids]);
        expect(u2).toBeGreaterThan(u1);
      }));

    it(`a watcher whose backlog exceeds its bound gets a lag fault, receives nothing more, and resumes from resnapshot called inside its listener (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 3, maxBacklog: 5 }, call);
        for (let i = 0; i < 7; i++) await root.commit((tx) => tx.entry(userKind, userEntry(`e${i}`, 0)), call);
        const events: ConversationEvent[] = [];
        const views: ConversationView[] = [];
        w.start((e) => {
          events.push(e);
          if (e.type === "fault") void w.resnapshot(call).then((v) => views.push(v));
        });
        await delivered(h);
        expect(events).toEqual([
          { type: "fault", error: { code: "lagged", message: expect.stringContaining("resnapshot") } },
        ]);
        await until(h, () => views.length === 1, "resnapshot");
        expect(views[0]?.faulted).toBe(false);
        expect(views[0]?.entries).toHaveLength(3);
        expect(views[0]?.readAt).toBe(storage.lastSeq);
        const next = await root.commit((tx) => tx.entry(userKind, userEntry("after", 0)), call);
        await delivered(h);
        expect(events.map((e) => e.type)).toEqual(["fault", "entry"]);
        expect(w.view.entries.at(-1)?.id).toBe(next);
        expect(w.view.readAt).toBe(next);
      }));

    it(`resnapshot is a barrier: events queued before the capture are dropped, and later commits arrive only after the caller has the new view (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 10 }, call);
        for (let i = 0; i < 3; i++) await root.commit((tx) => tx.entry(userKind, userEntry(`old${i}`, 0)), call);
        const order: string[] = [];
        w.start((e) => order.push(e.type === "entry" ? `event ${e.entry.id}` : e.type));
        const resnap = w.resnapshot(call);
        const landing = root.commit((tx) => tx.entry(userKind, userEntry("new", 0)), call);
        const view = await resnap;
        order.push(`view ${view.readAt}`);
        const id = await landing;
        await delivered(h);
        expect(order).toEqual([`view ${id - 1}`, `event ${id}`]);
        expect(w.view.entries.map((e) => e.id)).toEqual([...view.entries.map((e) => e.id), id]);
      }));

    it(`unsubscribe stops delivery at once, including the rest of a commit and events already queued (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 3 }, call);
        const events: ConversationEvent[] = [];
        w.start((e) => {
          events.push(e);
          w.unsubscribe();
        });
        await root.commit((tx) => {
          tx.entry(userKind, userEntry("seen", 0));
          tx.entry(userKind, userEntry("rest of the commit", 0));
        }, call);
        await root.commit((tx) => tx.entry(userKind, userEntry("later", 0)), call);
        await delivered(h);
        expect(events.map((e) => (e.type === "entry" ? e.entry.model?.[0]?.content : e.type))).toEqual(["seen"]);

        const queued = await watchConversation(h, root.id, { tail: 3 }, call);
        await root.commit((tx) => tx.entry(userKind, userEntry("queued", 0)), call);
        queued.unsubscribe();
        const late: ConversationEvent[] = [];
        queued.start((e) => late.push(e));
        await root.commit((tx) => tx.entry(userKind, userEntry("after", 0)), call);
        await delivered(h);
        expect(late).toEqual([]);
        expect(watchHub(h).size).toBe(0);
        w.unsubscribe();
      }));

    it(`preview ops flushed after each scratch commit fan out as task_output with that commit and fold into view.previews; settlement drops the preview (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        streamControl.hub = watchHub(h);
        streamControl.gate = gate();
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 3 }, call);
        const other = await watchConversation(h, root.id, { tail: 3 }, call);
        const messages: WatchMessage<ConversationEvent>[] = [];
        let remote = wire(w.view);
        const seen: unknown[] = [];
        w.startCommits((m) => {
          messages.push(m);
          remote = applyMessage(remote, wire(m));
        });
        other.start((e) => {
          if (e.type === "task_output") seen.push(previewOf(other.view, e.task));
        });
        const taskId = await root.commit(
          (tx) => tx.task(streamKind, { state: { status: "planned", tokens: ["Hel", "lo", "!"] } }),
          call,
        );
        const driving = root.drive(call);
        await until(
          h,
          () =>
            previewOf(w.view, taskId) !== undefined &&
            (previewOf(w.view, taskId) as { text: string }).text === "Hello!",
          "preview",
        );
        expect(previewOf(remote, taskId)).toEqual({ text: "Hello!" });
        expect(seen).toEqual([{ text: "" }, { text: "Hel" }, { text: "Hello" }, { text: "Hello!" }]);
        const outputs = messages.flatMap((m) =>
          m.events.filter((e) => e.type === "task_output").map((e) => ({ seq: m.seq, e })),
        );
        expect(outputs.map((o) => (o.e.type === "task_output" ? o.e.ops : []))).toEqual([
          [["r", { text: "" }]],
          [["a", ["text"], "Hel"]],
          [["a", ["text"], "lo"]],
          [["a", ["text"], "!"]],
        ]);
        // Each flush travels in its scratch commit's own message.
        for (const o of outputs.slice(1)) expect(messages.find((m) => m.seq === o.seq)?.events).toHaveLength(1);
        // A watch opened now captures the current preview.
        const late = await watchConversation(h, root.id, { tail: 1 }, call);
        expect(previewOf(late.view, taskId)).toEqual({ text: "Hello!" });

        streamControl.gate.resolve();
        expect(await driving).toBe("idle");
        await delivered(h);
        expect(w.view.tasks).toEqual([]);
        expect(w.view.previews).toEqual({});
        expect(remote).toEqual(wire(w.view));
        expect(watchHub(h).previews.tasks()).toEqual([]);
      }));

    it(`a kind declaring preview gets it built with preview.init at invocation start, the base published first; a kind without preview gets none and no task_output (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        initControl.gate = gate();
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 3 }, call);
        const outputs: { task: Id; ops: unknown }[] = [];
        w.start((e) => {
          if (e.type === "task_output") outputs.push({ task: e.task, ops: e.ops });
        });
        const plain = await root.commit(
          (tx) => tx.task(plainKind, { state: { status: "planned", text: "quiet" } }),
          call,
        );
        const previewed = await root.commit(
          (tx) => tx.task(previewedKind, { state: { status: "planned", text: "kept" } }),
          call,
        );
        const driving = root.drive(call);
        await until(h, () => outputs.length > 0, "the previewed kind's base");
        // init ran before execute wrote its scratch: the base is the empty buffer.
        expect(outputs[0]).toEqual({ task: previewed, ops: [["r", { text: "" }]] });
        expect(previewOf(w.view, previewed)).toEqual({ text: "" });
        await flush(h, 3);
        expect(outputs.map((o) => o.task)).toEqual([previewed]);
        expect(previewOf(w.view, plain)).toBeUndefined();
        expect(watchHub(h).previews.tasks()).toEqual([previewed]);
        initControl.gate.resolve();
        expect(await driving).toBe("idle");
        await delivered(h);
        expect(w.view.previews).toEqual({});
        w.unsubscribe();
      }));

    it(`published preview ops reach the watchers of the task's conversation only and are dropped for tasks that are not live (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const other = await root.fork({ at: "start" }, call);
        const w = await watchConversation(h, root.id, { tail: 1 }, call);
        const wOther = await watchConversation(h, other.id, { tail: 1 }, call);
        const events: ConversationEvent[] = [];
        const otherEvents: ConversationEvent[] = [];
        w.start((e) => events.push(e));
        wOther.start((e) => otherEvents.push(e));
        const taskId = await root.commit((tx) => tx.task(workKind, { state: { status: "pending", input: 1 } }), call);
        const hub = watchHub(h);
        hub.previews.publish(taskId, [["r", { lines: [] }]]);
        hub.previews.publish(taskId, [["p", ["lines"], 0, 0, ["one"]]]);
        await delivered(h);
        expect(events.filter((e) => e.type === "task_output")).toHaveLength(2);
        expect(otherEvents.filter((e) => e.type === "task_output")).toEqual([]);
        expect(previewOf(w.view, taskId)).toEqual({ lines: ["one"] });
        const task = (await h.getTask(workKind, taskId, call))!;
        await root.commit((tx) => tx.settle(task, "failed", { input: 1, error: "gone" }), call);
        hub.previews.publish(taskId, [["r", { lines: ["stale"] }]]);
        await delivered(h);
        expect(events.at(-1)?.type).toBe("task_end");
        expect(w.view.previews).toEqual({});
        expect(hub.previews.current(taskId)).toBeUndefined();
      }));

    it(`a raw watch delivers every CommittedBatch itself, in order, and still maintains its view (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 2, raw: true }, call);
        const got: RawWatchEvent[] = [];
        w.start((e) => got.push(e));
        const e1 = await root.commit((tx) => tx.entry(userKind, userEntry("a", 0)), call);
        await h.commit((tx) => tx.value(budget).set(1), call);
        await delivered(h);
        expect(got.map((c) => ("batch" in c ? c.last : c.type))).toEqual([e1, storage.lastSeq]);
        expect(w.view.entries.map((e) => e.id)).toEqual([e1]);
      }));

    it(`the session watch sees conversations created and deleted, watched session values and usage rows; a remote fold agrees (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchSession(h, call);
        expect(w.view.conversations.map((c) => c.id)).toEqual([root.id]);
        let remote = wire(w.view);
        const events: SessionEvent[] = [];
        w.startCommits((m) => {
          events.push(...m.events);
          remote = applySessionMessage(remote, wire(m));
        });
        const fork = await root.fork({ at: "start" }, call);
        await h.commit((tx) => {
          tx.list(sessionList("pi.usage")).append({
            conversationId: root.id,
            taskId: 0,
            kind: "x",
            model: "m",
            usage: null,
          });
          tx.value(sessionValue<number>("pi.usage.totals")).set(1);
          tx.value(budget).set(5);
        }, call);
        const forkWatch = await watchConversation(h, fork.id, { tail: 1 }, call);
        const forkEvents: ConversationEvent[] = [];
        forkWatch.start((e) => forkEvents.push(e));
        await h.deleteConversation(fork.id, call);
        await delivered(h);
        // A watched conversation that is deleted ends its watch with closed.
        expect(forkEvents).toEqual([{ type: "closed" }]);
        expect(types(events)).toEqual(["conversation", "value", "value", "usage", "conversation"]);
        expect(events.find((e) => e.type === "usage")).toMatchObject({ totals: 1 });
        expect(w.view.conversations.map((c) => c.id)).toEqual([root.id]);
        expect(w.view.values).toEqual({
          [addressKey({ scope: { session: true }, namespace: "pi.usage.totals", rewind: false })]: 1,
          [addressKey({ scope: { session: true }, namespace: "plugin.budget", rewind: false })]: 5,
        });
        expect(remote).toEqual(wire(w.view));
      }));

    it(`hub fault and close reach every watcher: a fault event turns the view faulted, closed comes last and ends delivery (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await open(storage);
        const root = await h.root(call);
        const w = await watchConversation(h, root.id, { tail: 1 }, call);
        const s = await watchSession(h, call);
        const events: ConversationEvent[] = [];
        const sessionEvents: SessionEvent[] = [];
        w.start((e) => events.push(e));
        s.start((e) => sessionEvents.push(e));
        const hub = watchHub(h);
        hub.report({ task: 9, kind: "work", method: "execute", error: "boom" });
        hub.fault({ message: "broken abort", error: new Error("x"), taskId: 9 });
        hub.close();
        await delivered(h);
        expect(types(events)).toEqual(["fault", "closed"]);
        expect(events[0]).toEqual({ type: "fault", error: { code: "faulted", message: "broken abort", taskId: 9 } });
        expect(w.view.faulted).toBe(true);
        expect(types(sessionEvents)).toEqual(["report", "fault", "closed"]);
        expect(hub.size).toBe(0);
        await expect(w.resnapshot(call)).rejects.toMatchObject({ code: "closed" });
      }));
  });
}

describe("watch reducer", () => {
  const conversation = { id: 1 };
  const base: ConversationView = Object.freeze({
    conversation,
    tail: 2,
    entries: Object.freeze([]),
    context: Object.freeze([]),
    tasks: Object.freeze([]),
    inbox: Object.freeze([]),
    values: Object.freeze({}),
    previews: Object.freeze({}),
    faulted: false,
    readAt: 1,
  });
  const entry = (id: Id, extraFields: Partial<Entry> = {}): Entry => ({
    id,
    conversationId: 1,
    kind: "user",
    ...extraFields,
  });
  const task = (id: Id, status: string): Task => ({
    id,
    conversationId: 1,
    kind: "work",
    role: "start",
    state: { status },
    after: [],
  });

  it("applyEvent is pure, trims entries to the tail and extends the context only for plain entries", () => {
    let view = applyEvent(base, { type: "entry", entry: entry(2) });
    view = applyEvent(view, { type: "entry", entry: entry(3, { head: 3 }) });
    view = applyEvent(view, { type: "entry", entry: entry(4, { edits: [{ target: 2, action: "omit" }] }) });
    view = applyEvent(view, { type: "entry", entry: entry(5) });
    expect(view.entries.map((e) => e.id)).toEqual([4, 5]);
    expect(view.context).toEqual([2, 5]);
    view = applyEvent(view, { type: "context", ids: [3, 5] });
    expect(view.context).toEqual([3, 5]);
    expect(base.entries).toEqual([]);
  });

  it("applyEvent upserts tasks in id order, folds preview ops per task and drops them on task_end", () => {
    let view = applyEvent(base, { type: "task_start", task: task(7, "a") });
    view = applyEvent(view, { type: "task_start", task: task(5, "a") });
    view = applyEvent(view, { type: "task_update", task: task(7, "b"), previous: task(7, "a") });
    view = applyEvent(view, { type: "task_output", task: 7, ops: [["r", { text: "x" }]] });
    const shared = view;
    const a = applyEvent(shared, { type: "task_output", task: 7, ops: [["a", ["text"], "y"]] });
    const b = applyEvent(shared, { type: "task_output", task: 7, ops: [["a", ["text"], "z"]] });
    expect(previewOf(a, 7)).toEqual({ text: "xy" });
    expect(previewOf(b, 7)).toEqual({ text: "xz" });
    expect(previewOf(shared, 7)).toEqual({ text: "x" });
    expect(view.tasks.map((t) => [t.id, t.state.status])).toEqual([
      [5, "a"],
      [7, "b"],
    ]);
    view = applyEvent(a, { type: "task_end", task: task(7, "done") });
    expect(view.tasks.map((t) => t.id)).toEqual([5]);
    expect(view.previews).toEqual({});
  });

  it("inbox ops apply in order and values are keyed by the canonical address string", () => {
    const addr = { scope: { conversation: 1 }, namespace: "x", rewind: false };
    let view = applyEvent(base, {
      type: "inbox",
      ops: [
        { type: "append", item: { id: 3, value: { mode: "followUp", input: "a" } } },
        { type: "append", item: { id: 4, value: { mode: "steer", input: "b" } } },
        { type: "remove", id: 3 },
      ],
    });
    expect(view.inbox.map((e) => e.id)).toEqual([4]);
    view = applyEvent(view, { type: "inbox", ops: [{ type: "clear" }] });
    expect(view.inbox).toEqual([]);
    view = applyEvent(view, { type: "value", addr, value: { on: true } });
    expect(view.values).toEqual({ [addressKey(addr)]: { on: true } });
    view = applyEvent(view, { type: "value", addr, value: undefined });
    expect(view.values).toEqual({});
    view = applyMessage(view, { seq: 9, events: [{ type: "fault", error: { code: "lagged", message: "m" } }] });
    expect(view.faulted).toBe(true);
    expect(view.readAt).toBe(9);
  });
});

function bindMode(conversationId: Id) {
  return { scope: { conversation: conversationId }, namespace: "plugin.mode", rewind: false };
}
