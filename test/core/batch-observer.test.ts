/**
 * The harness's batch observer (`HarnessOptions.observeBatch`, session-types.ts `BatchObserver`): what
 * it adds lands in the same commit as the batch it saw, a batch the harness rejects leaves nothing of
 * it, scratch batches are not observed, and without the option nothing changes. Then the outbox's
 * detectors (src/worker/outbox/events.ts) on batches written as the kinds write them: a failed turn's
 * results, a write-mode input, and the witness's mail to the mayor.
 */
import { describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, type BatchView } from "../../src/core/harness.js";
import { bindResult, type InputResult } from "../../src/core/inbox.js";
import { bind, sessionList, sessionValue } from "../../src/core/state.js";
import { TxBuilder } from "../../src/core/tx-builder.js";
import { TaskKindRegistry } from "../../src/core/task-kind-types.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { MainWrite } from "../../src/storage/records.js";
import { mailbox } from "../../src/rig/state.js";
import { cutUtf8, detectEvents } from "../../src/worker/outbox/events.js";

const call = BACKGROUND_CONTEXT;
const seen = sessionList<{ first: number; writes: number }>("test.seen");
const counter = sessionValue<number>("test.counter");

describe("batch observer", () => {
  it("appends in the observed commit, never for a rejected batch, and changes nothing when absent", async () => {
    const views: BatchView[] = [];
    const storage = new MemoryStorage();
    const h = await Harness.open(
      storage,
      {
        observeBatch: (view, b) => {
          views.push(view);
          if (view.writes.some((write) => write.type === "value.set" && write.addr.namespace === "test.counter"))
            b.list(seen).append({ first: view.first, writes: view.writes.length });
        },
      },
      call,
    );
    const before = storage.lastSeq;
    await h.commit((tx) => tx.value(counter).set(1), call);
    // The observer's element is the commit's last write: one commit, first..last.
    expect(storage.lastSeq).toBe(before + 2);
    const elements = (await storage.readList(bind(seen, {}), { limit: 10 })).items;
    expect(elements).toEqual([{ id: before + 2, value: { first: before + 1, writes: 1 } }]);
    // A batch the harness refuses (a request key remapped is a validation error) keeps nothing of the observer's.
    const refused = (async (): Promise<void> => {
      await h.commit((tx) => {
        tx.value(counter).set(2);
        tx.value(sessionValue("pi.request", { key: "k" })).set({ requestId: "k", conversationId: 1, inputId: 1 });
        tx.value(sessionValue("pi.request", { key: "k" })).set({ requestId: "k", conversationId: 1, inputId: 2 });
      }, call);
    })();
    await expect(refused).rejects.toThrow();
    expect((await storage.readList(bind(seen, {}), { limit: 10 })).items).toHaveLength(1);
    expect(storage.lastSeq).toBe(before + 2);
    // Without the option the same commit writes only its own write.
    const plain = new MemoryStorage();
    const p = await Harness.open(plain, {}, call);
    const start = plain.lastSeq;
    await p.commit((tx) => tx.value(counter).set(1), call);
    expect(plain.lastSeq).toBe(start + 1);
    expect((await plain.readList(bind(seen, {}), { limit: 10 })).items).toEqual([]);
  });
});

/** A builder over storage holding `results` as committed (written without the harness's validation). */
async function builderWith(
  results: readonly [number, InputResult][],
): Promise<{ storage: MemoryStorage; b: TxBuilder }> {
  const storage = new MemoryStorage();
  await storage.commit({
    kind: "main",
    writes: [
      { type: "createConversation", conversation: { id: 1 } },
      ...results.map(([inputId, result]): MainWrite => ({
        type: "value.set",
        addr: bindResult(1, inputId),
        value: result,
      })),
    ],
  });
  return { storage, b: new TxBuilder(storage, new TaskKindRegistry([]), {}) };
}

describe("outbox detectors", () => {
  it("a failed turn's results are input.completed (unanswered) and one turn.failed per conversation", async () => {
    const { storage, b } = await builderWith([
      [5, { status: "placed", entry: 5 }],
      [6, { status: "placed", entry: 6 }],
    ]);
    const failed = (inputId: number): MainWrite => ({
      type: "value.set",
      addr: bindResult(1, inputId),
      value: { status: "unanswered", entry: inputId, reason: "failed", detail: "the provider answered 500" },
    });
    const events = await detectEvents(
      { writes: [failed(5), failed(6)], first: storage.lastSeq + 1, origin: undefined },
      b,
    );
    expect(events).toEqual([
      { type: "input.completed", data: { conversationId: 1, inputId: 5, status: "unanswered", reason: "failed" } },
      { type: "input.completed", data: { conversationId: 1, inputId: 6, status: "unanswered", reason: "failed" } },
      { type: "turn.failed", data: { conversationId: 1, inputIds: [5, 6], detail: "the provider answered 500" } },
    ]);
  });

  it("a write-mode input (queued straight to done) and a result already terminal report nothing", async () => {
    const { storage, b } = await builderWith([
      [5, { status: "queued" }],
      [6, { status: "done", entry: 6, answer: 7 }],
    ]);
    const writes: MainWrite[] = [
      { type: "value.set", addr: bindResult(1, 5), value: { status: "done", entry: 9 } },
      { type: "value.set", addr: bindResult(1, 6), value: { status: "done", entry: 6, answer: 7 } },
    ];
    expect(await detectEvents({ writes, first: storage.lastSeq + 1, origin: undefined }, b)).toEqual([]);
  });

  it("the witness's mail to the mayor is rig.escalation; other mail is not", async () => {
    const { storage, b } = await builderWith([]);
    const mail = (sender: string, payload: string): MainWrite => ({
      type: "list.append",
      addr: bind(mailbox("mayor"), {}),
      value: {
        from: sender,
        to: "mayor",
        channel: "mail",
        payload,
        timestamp: "2026-01-01T00:00:00.000Z",
        durable: true,
        sender,
      },
    });
    const first = storage.lastSeq + 1;
    const events = await detectEvents(
      {
        writes: [
          mail("agent", "STALL_ALERT: not from the witness"),
          mail("witness", "STALL_CRITICAL: polecat-a idle 30m on gt-1"),
        ],
        first,
        origin: undefined,
      },
      b,
    );
    expect(events).toEqual([
      {
        type: "rig.escalation",
        data: { kind: "STALL_CRITICAL", mailId: first + 1, payload: "STALL_CRITICAL: polecat-a idle 30m on gt-1" },
      },
    ]);
  });

  it("cuts text at a byte bound without splitting a character", () => {
    expect(cutUtf8("abc", 4096)).toBe("abc");
    expect(cutUtf8("ééé", 5)).toBe("éé");
    expect(new TextEncoder().encode(cutUtf8("x".repeat(5000), 4096)).length).toBe(4096);
  });
});
